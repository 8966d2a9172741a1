//! Which pool a node is in, and the pool rule: a pool MCO has not finished rolling out
//! (docs/policy.md, rules 3 and 4). Membership is MCO's own (`ListPools`, `GetPoolsForNode` in
//! `pkg/helpers/helpers.go`), because the pool rule must count exactly the nodes MCO's node
//! controller will update next. Because this rule scans every node, [`super::index`]'s
//! `guarded_digests` gives none while an unpaused pool targets a guarded image.

use std::collections::BinaryHeap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::core::model::{LABEL_NODE_OS, MachineConfigPool, MachineOSConfig};
use crate::core::node::{NodeImages, NodeMeta};
use crate::core::node_controller::{self, can_layered_continue};
use crate::core::selector::{self, Labels, Validity};
use crate::core::snapshot::Snapshot;

use super::images::GuardedImages;
use super::memo::{Memo, Text};
use super::verdict::{Deletion, GuardedImage, NAMED_NEXT_NODES, RollingPool};

const MASTER: &str = "master";
const WORKER: &str = "worker";

/// The pools of a snapshot, ready to place nodes as MCO does.
pub struct Membership<'p> {
    /// Pools with a selector that selects something.
    pools: Vec<(&'p MachineConfigPool, &'p LabelSelector)>,
    /// Set when some pool's selector is invalid: MCO then places no node at all.
    invalid: bool,
}

impl<'p> Membership<'p> {
    pub fn new(pools: &'p [Arc<MachineConfigPool>]) -> Self {
        let mut invalid = false;
        let mut usable = Vec::new();
        for pool in pools {
            let Some(sel) = pool.spec.node_selector.as_ref() else {
                continue; // nil selects nothing (`labels.Nothing()`)
            };
            match selector::check(sel) {
                Validity::Invalid(_) => invalid = true,
                Validity::Empty => {}
                Validity::Valid => usable.push((pool.as_ref(), sel)),
            }
        }
        Membership {
            pools: usable,
            invalid,
        }
    }

    /// The node's pool as `GetPrimaryPoolForNode` returns it; `None` for a node MCO does not
    /// manage.
    pub fn primary<L: Labels + ?Sized>(&self, node: &L) -> Option<&'p str> {
        if self.invalid || node.label(LABEL_NODE_OS) == Some("windows") {
            return None;
        }
        let (mut master, mut worker) = (false, false);
        let mut custom: Option<&'p str> = None;
        let mut customs = 0;
        for (pool, sel) in &self.pools {
            if !selector::matches(sel, node) {
                continue;
            }
            match pool.name() {
                MASTER => master = true,
                WORKER => worker = true,
                name => {
                    customs += 1;
                    custom = Some(name);
                }
            }
        }
        match (customs, master, worker) {
            (2.., _, _) => None,
            (1, true, _) => Some(MASTER),
            (1, false, _) => custom,
            (_, true, _) => Some(MASTER),
            (_, false, true) => Some(WORKER),
            _ => None,
        }
    }

    /// Whether `pool` is the node's pool, testing that pool's own selector first (cheap, and
    /// false for most nodes of a cluster with several pools).
    pub fn is_member(&self, node: &NodeMeta, pool: &str) -> bool {
        let own = self.pools.iter().find(|(p, _)| p.name() == pool);
        match own {
            Some((_, sel)) if selector::matches(sel, node) => self.primary(node) == Some(pool),
            _ => false,
        }
    }
}

/// The node labels membership reads: the keys of the pools' selectors and the OS label. A node
/// kept with only these is placed exactly as with all of its labels.
pub fn membership_labels(pools: &[Arc<MachineConfigPool>]) -> std::collections::BTreeSet<&str> {
    pools
        .iter()
        .filter_map(|p| p.spec.node_selector.as_ref())
        .flat_map(selector::keys)
        .chain([LABEL_NODE_OS])
        .collect()
}

/// Pools MCO has not finished rolling out (see [`RollingPool`]) to a guarded image.
pub(super) fn rolling_pools(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    guarded: &GuardedImages,
    members: &Membership<'_>,
) -> Vec<RollingPool> {
    let mut rolling: Vec<RollingPool> = rolling_targets(snapshot, target, guarded)
        .into_iter()
        // Only a node of the pool that has not reached the image makes MCO target it again;
        // 4.20 reports `Updating` also while a new build runs or after one failed, with every
        // node on this image, and still `Updated` for a moment after the config points at a
        // new image, so the pool's status decides nothing here.
        .filter_map(|(pool, current, image)| {
            let (count, first) = pending_nodes(snapshot, pool, current, members);
            (count > 0).then(|| RollingPool {
                pool: pool.name().to_string(),
                image: image.image,
                pending_nodes: Some(count),
                next_nodes: first,
                updated_machines: pool.status.updated_machine_count,
                machines: pool.status.machine_count,
            })
        })
        .collect();
    rolling.sort_by(|a, b| a.pool.cmp(&b.pool));
    rolling
}

/// Pools not paused whose MachineOSConfig's current image is guarded and to which MCO is
/// sending nodes ([`can_layered_continue`]): each with that image as the config spells it and as
/// [`GuardedImages`] lists it (the configs by [`config_of`]). Reads no node.
pub(super) fn rolling_targets<'s>(
    snapshot: &'s Snapshot,
    target: Deletion<'s>,
    guarded: &GuardedImages,
) -> Vec<(&'s MachineConfigPool, &'s str, GuardedImage)> {
    if guarded.is_empty() {
        return Vec::new();
    }
    snapshot
        .pools
        .iter()
        .filter(|p| !p.is_paused())
        .filter_map(|p| {
            let config = config_of(snapshot, target, p.name())?;
            let current = config.current_image()?;
            let image = guarded.find(current)?;
            // MCO sends further nodes only while `canLayeredContinue` holds; a pool whose
            // configuration the objects do not show (a trimmed dump) cannot be told: it holds.
            can_layered_continue(p, config, &snapshot.machine_os_builds)
                .unwrap_or(true)
                .then(|| (p.as_ref(), current, image.clone()))
        })
        .collect()
}

/// MCO's `getConfigAndBuild`: the config whose `spec.machineConfigPool.name` is `pool`, the
/// MachineOSConfig being deleted taken from the request, the others from the snapshot.
pub(super) fn config_of<'s>(
    snapshot: &'s Snapshot,
    target: Deletion<'s>,
    pool: &str,
) -> Option<&'s MachineOSConfig> {
    match target {
        Deletion::MachineOSConfig(m) if m.pool_name() == pool => Some(m),
        _ => node_controller::config_of(pool, &snapshot.machine_os_configs),
    }
}

/// Nodes of `pool` (by [`Membership`]) whose `currentImage` is not `image` as MCO compares it,
/// counted, and the first [`NAMED_NEXT_NODES`] by name: the exact string (a node whose
/// annotation spells the image differently is sent to it again, and pulls it again). It needs
/// every node: which is why `guarded_digests` sends a decision with such a pool to a full scan,
/// and why the cheap tests (the image text, then the pool's own selector) run before the full ones.
fn pending_nodes(
    snapshot: &Snapshot,
    pool: &MachineConfigPool,
    image: &str,
    members: &Membership<'_>,
) -> (usize, Vec<String>) {
    let mut on_image = Memo::default();
    let mut count = 0;
    // A max-heap of the smallest names seen: its top is the one to drop.
    let mut first: BinaryHeap<&str> = BinaryHeap::new();
    for node in &snapshot.nodes {
        let current = NodeImages::of(node).current;
        let reached = on_image.get_or(Text(current), || current == Some(image.trim()));
        if reached || !members.is_member(node, pool.name()) {
            continue;
        }
        count += 1;
        first.push(node.name());
        if first.len() > NAMED_NEXT_NODES {
            first.pop();
        }
    }
    let first = first.into_sorted_vec().into_iter().map(str::to_string);
    (count, first.collect())
}
