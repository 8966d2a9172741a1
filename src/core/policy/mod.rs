//! The deletion policy: a pure function from a snapshot to a verdict with reasons.
//!
//! The danger (see docs/design.md) is a node that still has to pull an image built from
//! the object being deleted: MCO 4.20 deletes those images from the registry as soon as
//! the MachineOSConfig is gone, and the node then degrades with "manifest unknown".
//! A node that already *runs* the image does not need the registry any more, so by
//! default (`in-flight`) only nodes whose desired image is not yet reached block.

mod images;
mod joining;
mod memo;
mod pools;
mod scan;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::core::model::{MachineOSBuild, MachineOSConfig, override_reason};
use crate::core::node::NodeMeta;
use crate::core::release::Rules;
use crate::core::snapshot::Snapshot;

use images::Guard;
pub use images::deleted_with;
pub use pools::{Membership, NAMED_NEXT_NODES, membership_labels};

/// How strictly "a node still needs the image" is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// Block while a node's desired image is one of the images and not yet reached.
    #[default]
    InFlight,
    /// Also block while a node runs one of the images (a settled pool then can never
    /// leave image mode without the override).
    InUse,
}

impl fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyMode::InFlight => "in-flight",
            PolicyMode::InUse => "in-use",
        })
    }
}

/// Kinds of object the guard protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TargetKind {
    MachineOSConfig,
    MachineOSBuild,
}

impl TargetKind {
    /// Lower-case kind as `oc` spells it in commands.
    pub fn cli_name(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfig",
            TargetKind::MachineOSBuild => "machineosbuild",
        }
    }

    /// The API kind.
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "MachineOSConfig",
            TargetKind::MachineOSBuild => "MachineOSBuild",
        }
    }

    /// Bounded label value for metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfigs",
            TargetKind::MachineOSBuild => "machineosbuilds",
        }
    }
}

/// The object whose deletion is being decided.
#[derive(Clone, Copy, Debug)]
pub enum Deletion<'a> {
    MachineOSConfig(&'a MachineOSConfig),
    MachineOSBuild(&'a MachineOSBuild),
}

/// An image the deletion would remove from the registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardedImage {
    pub image: String,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
}

/// Why a node blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockReason {
    /// Desired image is one of the guarded images and the node has not reached it.
    InFlight,
    /// The node runs one of the guarded images (`in-use` mode only).
    InUse,
}

/// A node that still needs one of the guarded images.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingNode {
    pub node: String,
    pub pool: Option<String>,
    pub current_image: Option<String>,
    pub desired_image: Option<String>,
    pub state: Option<String>,
    /// The guarded image this node matched.
    pub image: String,
    /// The build that produced it, when known.
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
    #[serde(skip)]
    pub reason: BlockReason,
}

/// A pool MCO has not finished rolling out to one of the guarded images: not paused, its
/// MachineOSConfig's current image is guarded, the build for its rendered config has not failed,
/// and a node MCO places in it does not run that image yet (as an exact string).
/// MCO sends those nodes to the image one after another; between two of them (or before the
/// first, while the pool's status still reads `Updated`) no node may need the image at that
/// instant, but deleting it then degrades the pool just the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingPool {
    pub pool: String,
    /// The guarded image the pool is rolling out (its MachineOSConfig's current image).
    pub image: String,
    /// Nodes of the pool that do not run the image yet, counted from the nodes themselves;
    /// `None` when the verdict was decided from the index's candidates (see
    /// [`evaluate_blocked`]), where at least one of them is known not to.
    pub pending_nodes: Option<usize>,
    /// The first [`NAMED_NEXT_NODES`] of those nodes by name: the nodes MCO updates next.
    pub next_nodes: Vec<String>,
    /// The pool's own progress report (`status.updatedMachineCount`, `status.machineCount`),
    /// which lags the nodes.
    pub updated_machines: Option<i64>,
    pub machines: Option<i64>,
}

/// A machine that is joining the cluster (Provisioning or Provisioned, no Node yet) and whose
/// first boot would pull one of the guarded images from the Machine Config Server's Ignition
/// (4.21 and later; see `joining`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoiningMachine {
    /// `namespace/name`.
    pub machine: String,
    pub phase: String,
    pub machine_set: Option<String>,
    /// The pool whose image it would pull.
    pub pool: String,
    /// False when its user-data secret names no pool, so it counts for every pool.
    pub pool_known: bool,
    pub image: String,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
}

/// The decision, with everything needed to explain it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub kind: TargetKind,
    pub name: String,
    pub mode: PolicyMode,
    pub allowed: bool,
    /// Set when the override annotation let a blocked deletion through.
    pub override_reason: Option<String>,
    pub images: Vec<GuardedImage>,
    /// Sorted by node name.
    pub blocking: Vec<BlockingNode>,
    /// Pools not done rolling out one of the images, sorted by name.
    pub rolling: Vec<RollingPool>,
    /// Joining machines that would pull one of the images, sorted by namespace/name.
    pub joining: Vec<JoiningMachine>,
    /// The release rules the verdict was decided with.
    pub rules: Rules,
}

impl Verdict {
    /// Whether anything blocks the deletion (the override aside).
    pub fn blocked(&self) -> bool {
        !self.blocking.is_empty() || !self.rolling.is_empty() || !self.joining.is_empty()
    }

    pub fn overridden(&self) -> bool {
        self.override_reason.is_some() && self.blocked()
    }
}

/// Decides whether `target` may be deleted given the rest of the cluster in `snapshot`.
pub fn evaluate(snapshot: &Snapshot, target: Deletion<'_>, mode: PolicyMode) -> Verdict {
    let (kind, meta, guard) = guard_for(snapshot, target);
    let members = Membership::new(&snapshot.pools);
    let blocking = scan::blocking_nodes(snapshot, &guard, mode, &members);
    let rolling = pools::rolling_pools(snapshot, target, &guard, &members);
    let joining = joining::joining_machines(snapshot, target, &guard);
    verdict(
        snapshot,
        (kind, meta, mode),
        &guard,
        blocking,
        rolling,
        joining,
    )
}

/// The digests a node's images must carry for the node to block by itself (the node rule,
/// without the pool rule), or `None` when only a scan of every node can find such nodes.
/// Candidates an index names for them feed [`evaluate_blocked`].
pub fn blocking_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    let (_, _, guard) = guard_for(snapshot, target);
    guard.digests()
}

/// The verdict when a node among `snapshot.nodes` blocks by itself (or a joining machine does,
/// which needs no node), `None` otherwise. The nodes
/// may be only candidates, a superset of the nodes that block by themselves (as the digest index
/// names for [`blocking_digests`]): a deletion such a node blocks is refused whatever the pool
/// rule adds, so the full scan that rule needs would change only the report. The blocking nodes
/// are exactly [`evaluate`]'s; the pools are those of its pools that have a candidate not on
/// the image, reported without a count (`pending_nodes: None`, no `next_nodes`).
pub fn evaluate_blocked(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
) -> Option<Verdict> {
    let (kind, meta, guard) = guard_for(snapshot, target);
    let members = Membership::new(&snapshot.pools);
    let blocking = scan::blocking_nodes(snapshot, &guard, mode, &members);
    let joining = joining::joining_machines(snapshot, target, &guard);
    if blocking.is_empty() && joining.is_empty() {
        return None;
    }
    let rolling = pools::rolling_pools(snapshot, target, &guard, &members)
        .into_iter()
        .map(|p| RollingPool {
            pending_nodes: None,
            next_nodes: Vec::new(),
            ..p
        })
        .collect();
    Some(verdict(
        snapshot,
        (kind, meta, mode),
        &guard,
        blocking,
        rolling,
        joining,
    ))
}

/// [`evaluate`] over nodes an index supplies: `nodes(Some(digests))` must return a superset of
/// the nodes carrying those digests (candidates), `nodes(None)` every node. The candidates of
/// [`guarded_digests`] decide alone; when the pool rule needs every node, the candidates of
/// [`blocking_digests`] are tried first and decide a denial by a node ([`evaluate_blocked`]).
/// What the webhook's cache uses, and the decision benchmark with it.
pub fn evaluate_indexed(
    objects: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
    nodes: impl Fn(Option<&BTreeSet<String>>) -> Vec<Arc<NodeMeta>>,
) -> Verdict {
    let mut snapshot = objects.clone();
    let digests = guarded_digests(objects, target);
    if digests.is_none()
        && let Some(blocking) = blocking_digests(objects, target)
    {
        snapshot.nodes = nodes(Some(&blocking));
        if let Some(denied) = evaluate_blocked(&snapshot, target, mode) {
            return denied;
        }
    }
    snapshot.nodes = nodes(digests.as_ref());
    evaluate(&snapshot, target, mode)
}

fn verdict(
    snapshot: &Snapshot,
    (kind, meta, mode): (TargetKind, &ObjectMeta, PolicyMode),
    guard: &Guard,
    blocking: Vec<BlockingNode>,
    rolling: Vec<RollingPool>,
    joining: Vec<JoiningMachine>,
) -> Verdict {
    let override_reason = override_reason(meta).map(str::to_string);
    let mut v = Verdict {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        mode,
        allowed: false,
        override_reason,
        images: guard.listed(),
        blocking,
        rolling,
        joining,
        rules: snapshot.rules(),
    };
    v.allowed = !v.blocked() || v.override_reason.is_some();
    v
}

/// The digests (lower-case hex) that a node's desired or current image must carry for the
/// node to matter to this deletion; `None` when only a scan of every node is safe (a guarded
/// image without a digest, or a pool rolling out a guarded image). Lets a caller with an index
/// hand [`evaluate`] only the candidate nodes. Reads builds, configs and pools, never nodes.
pub fn guarded_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    let (_, _, guard) = guard_for(snapshot, target);
    // A pool with a guarded target image blocks while any node of it has not reached the
    // image, and such a node need not carry a guarded digest at all (not targeted yet): only
    // every node can tell.
    if !pools::rolling_targets(snapshot, target, &guard).is_empty() {
        return None;
    }
    guard.digests()
}

fn guard_for<'a>(snapshot: &Snapshot, target: Deletion<'a>) -> (TargetKind, &'a ObjectMeta, Guard) {
    match target {
        Deletion::MachineOSConfig(mosc) => (
            TargetKind::MachineOSConfig,
            &mosc.metadata,
            images::of_config(snapshot, mosc),
        ),
        Deletion::MachineOSBuild(mosb) => (
            TargetKind::MachineOSBuild,
            &mosb.metadata,
            images::of_build(snapshot, mosb),
        ),
    }
}

#[cfg(test)]
mod tests;
