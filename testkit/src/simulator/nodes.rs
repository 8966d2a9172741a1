//! The node controller: rolls each pool's nodes to the pool's target (rendered config and, while
//! the pool's MOSC exists, its image) by their desiredConfig and desiredImage annotations (the
//! daemons do the rest), as `getAllCandidateMachines` allows: nodes unavailable for an update
//! ([`node_state::is_unavailable`]: unschedulable, not Ready, or not Done unless failing a config)
//! use up `maxUnavailable`, so a node stuck cordoned freezes its pool; unschedulable candidates
//! are skipped, so a node mid-update is never sent elsewhere (the 4.20 bug). A layered
//! pool's nodes are sent to the image only while `canLayeredContinue` (node_controller.go)
//! holds: the pool's build ([`pool_build`]: the MOSB whose `spec.machineOSConfig` is the pool's
//! MOSC and `spec.machineConfig` the pool's `spec.configuration`) has Succeeded and its
//! `digestedImagePushSpec` is the MOSC's `currentImagePullSpec`, as exact strings. A build
//! pending, running, failed or missing for `spec.configuration` stops the rollout (nodes already
//! sent keep updating: their daemons go on). Which candidates go first: [`super::candidates`].
//! With [`super::SimConfig::pool_sync_delay`] a pool is synced that long after a change to it,
//! its MOSC, its builds or its nodes (MCO's `enqueueDefault`, 5 s), not on every pass.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::candidates;
use super::ctx::Ctx;
use super::node_state::{self, Target};
use super::pool_target::{pool_build, pool_mosc, pool_target};
use super::reconcile::Reconciler;
use crate::Result;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, CURRENT_MOSB, DESIRED_CONFIG, DESIRED_IMAGE, REASON, STATE,
};

pub(super) struct NodeController {
    ctx: Ctx,
    /// Passes so far: which of several builds for one config a pass finds first (see
    /// [`pool_build`]), and the lister's order of the candidates ([`candidates::choose`]).
    turn: usize,
    /// Pool -> what its sync reads as last seen (a hash), and when its queued sync is due.
    queued: HashMap<String, (u64, Option<Instant>)>,
}

impl NodeController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            turn: 0,
            queued: HashMap::new(),
        }
    }

    /// Whether `pool`'s sync is due now: always without a
    /// [`super::SimConfig::pool_sync_delay`]; with one, that long after a change to what the
    /// sync reads (`inputs`: a hash of the objects' resourceVersions) was first seen.
    fn due(&mut self, pool: &str, inputs: u64, now: Instant) -> bool {
        let delay = self.ctx.node_delays().pool_sync;
        if delay.is_zero() {
            return true;
        }
        let entry = self
            .queued
            .entry(pool.to_owned())
            .or_insert((inputs, Some(now)));
        if entry.0 != inputs {
            entry.0 = inputs;
            entry.1.get_or_insert(now + delay);
        }
        entry.1.is_some_and(|due| due <= now)
    }

    /// The pool's sync ran: nothing is queued for it until the next change.
    fn synced(&mut self, pool: &str) {
        if let Some(entry) = self.queued.get_mut(pool) {
            entry.1 = None;
        }
    }

    async fn sync_pool(
        &self,
        pool: &DynamicObject,
        members: &[&Node],
        moscs: &[DynamicObject],
        mosbs: &[DynamicObject],
        turn: usize,
    ) -> Result<()> {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        if pool
            .data
            .get("spec")
            .and_then(|s| s.get("paused"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            return Ok(());
        }
        if self.ctx.knobs(|k| k.held_pools.contains(&pool_name)) {
            return Ok(()); // The gap between two batches, held open by the test.
        }
        let release = self.ctx.release();
        if let Some(mosc) = pool_mosc(pool, moscs)
            && let Some(stale) = pool_build(release, pool, mosc, mosbs, turn).stale_annotation
        {
            self.clear_stale_annotation(mosc, stale).await?;
        }
        let Some(target) = pool_target(release, pool, moscs, mosbs, turn) else {
            return Ok(()); // No succeeded build of the current config yet: nodes wait.
        };
        let Some(capacity) = capacity(pool, members, &target) else {
            return Ok(()); // maxUnavailable used up: the pool waits.
        };
        let candidates: Vec<&Node> = members
            .iter()
            .copied()
            .filter(|n| node_state::is_candidate(n, &target) && node_state::is_ready(n))
            .collect();
        let operator_node = self.ctx.knobs(|k| k.operator_node.clone());
        let chosen = candidates::choose(
            candidates,
            capacity,
            pool_name == "master",
            operator_node.as_deref(),
            turn,
        );
        for node in chosen {
            let name = node.metadata.name.clone().unwrap_or_default();
            let patch = json!({"metadata": {"annotations": {
                DESIRED_IMAGE: target.image,
                DESIRED_CONFIG: target.config,
            }}});
            self.ctx
                .write(
                    &format!("targeting node {name}"),
                    mco::nodes(&self.ctx.client).patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    ),
                )
                .await?;
            match &target.image {
                Some(image) => tracing::info!(
                    "sim node-controller: pool {pool_name}: node {name} -> desiredImage {image}, \
                     desiredConfig {}",
                    target.config
                ),
                None => tracing::info!(
                    "sim node-controller: pool {pool_name}: node {name} -> no desiredImage (pool is not \
                     layered), desiredConfig {}",
                    target.config
                ),
            }
        }
        Ok(())
    }
}

impl NodeController {
    /// 4.22 on: removes a `current-machine-os-build` annotation naming a build that is gone or
    /// for another config, so the build controller creates a new one.
    async fn clear_stale_annotation(&self, mosc: &DynamicObject, stale: &str) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
        tracing::info!(
            "sim node-controller: clearing stale current-machine-os-build annotation {stale:?} \
             from MachineOSConfig {name}"
        );
        let patch = json!({"metadata": {"annotations": {CURRENT_MOSB: null}}});
        self.ctx
            .write(
                &format!("clearing the stale current build of MachineOSConfig {name}"),
                mco::moscs(&self.ctx.client).patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ),
            )
            .await?;
        Ok(())
    }
}

impl Reconciler for NodeController {
    async fn sync(&mut self) -> Result<()> {
        // Nodes first: a node created (or labelled) for a pool made before it is then never
        // seen without its pool, which would send it another pool's config for one pass.
        let nodes = self.ctx.list(&mco::nodes(&self.ctx.client)).await?;
        let pools = self.ctx.list(&mco::mcps(&self.ctx.client)).await?;
        let moscs = self.ctx.list(&mco::moscs(&self.ctx.client)).await?;
        let mosbs = self.ctx.list(&mco::mosbs(&self.ctx.client)).await?;
        self.turn = self.turn.wrapping_add(1);
        let now = Instant::now();
        for pool in &pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let members = pool_members(pool, &pools, &nodes);
            let inputs = inputs_of(pool, &members, &moscs, &mosbs);
            if !self.due(&name, inputs, now) {
                continue;
            }
            self.sync_pool(pool, &members, &moscs, &mosbs, self.turn)
                .await?;
            self.synced(&name);
        }
        Ok(())
    }

    fn waiting(&self) -> bool {
        self.queued.values().any(|(_, due)| due.is_some())
    }
}

/// A hash of what queues a pool's sync in MCO: any change to the pool, a MOSC or a build (their
/// resourceVersions), and of its nodes what `updateNode` counts as a change: readiness
/// (`CheckNodeReady`: the Ready, DiskPressure and NetworkUnavailable conditions, and
/// `spec.unschedulable`), the daemon's six annotations (configs, images, state, reason), labels
/// and taints. Not the drain annotations: a daemon asking for its uncordon queues no sync, the
/// drain controller's uncordon does.
fn inputs_of(
    pool: &DynamicObject,
    members: &[&Node],
    moscs: &[DynamicObject],
    mosbs: &[DynamicObject],
) -> u64 {
    let mut h = DefaultHasher::new();
    pool.metadata.resource_version.hash(&mut h);
    for o in moscs.iter().chain(mosbs) {
        (&o.metadata.name, &o.metadata.resource_version).hash(&mut h);
    }
    for n in members {
        n.metadata.name.hash(&mut h);
        node_state::is_ready(n).hash(&mut h);
        for key in [
            CURRENT_CONFIG,
            DESIRED_CONFIG,
            STATE,
            REASON,
            CURRENT_IMAGE,
            DESIRED_IMAGE,
        ] {
            let annotations = n.metadata.annotations.as_ref();
            annotations.and_then(|a| a.get(key)).hash(&mut h);
        }
        n.metadata.labels.hash(&mut h);
        let taints = n.spec.as_ref().and_then(|s| s.taints.as_ref());
        format!("{taints:?}").hash(&mut h);
    }
    h.finish()
}

/// Nodes of a pool as MCO places them: [`mco::pool_members`] (`helpers.GetNodesForPool`,
/// over [`mco::primary_pool`]). The node controller, the pool status and the build
/// controller's in-use check all use this one function.
pub(super) use crate::mco::pool_members;

/// How many nodes of the pool may be targeted now (`getAllCandidateMachines`): `None` while
/// the unavailable nodes ([`node_state::is_unavailable`]) use up maxUnavailable, or the nodes
/// failing with the pool's target already ([`node_state::is_failing`]) use up the rest.
fn capacity(pool: &DynamicObject, members: &[&Node], target: &Target) -> Option<usize> {
    let max = max_unavailable(pool, members.len());
    let unavailable = members
        .iter()
        .filter(|n| node_state::is_unavailable(n))
        .count();
    let failing = members
        .iter()
        .filter(|n| !node_state::is_candidate(n, target) && node_state::is_failing(n))
        .count();
    max.checked_sub(unavailable)
        .and_then(|c| c.checked_sub(failing))
        .filter(|c| *c > 0)
}

/// `spec.maxUnavailable` as a node count (int or "N%", default 1, at least 1).
fn max_unavailable(pool: &DynamicObject, members: usize) -> usize {
    let value = pool.data.get("spec").and_then(|s| s.get("maxUnavailable"));
    let n = match value {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(1),
        Some(Value::String(s)) => match s.strip_suffix('%').map(str::parse::<usize>) {
            Some(Ok(pct)) => members * pct / 100,
            _ => s.parse().unwrap_or(1),
        },
        _ => 1,
    };
    n.max(1)
}
