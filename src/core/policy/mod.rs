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
mod verdict;

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::model::override_reason;
use crate::core::node::NodeMeta;
use crate::core::snapshot::Snapshot;

use images::Guard;
pub use images::deleted_with;
pub use pools::{Membership, membership_labels};
pub use verdict::{
    BlockReason, Blocked, BlockingNode, Deletion, GuardedImage, JoiningMachine, NAMED_NEXT_NODES,
    PolicyMode, RollingPool, TargetKind, Verdict,
};

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
