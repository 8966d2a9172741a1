//! The deletion policy: a pure function from a snapshot to a verdict with reasons.
//!
//! The danger (see docs/design.md) is a node that still has to pull an image built from
//! the object being deleted: MCO 4.20 deletes those images from the registry as soon as
//! the MachineOSConfig is gone, and the node then degrades with "manifest unknown".
//! A node that already *runs* the image does not need the registry any more, so by
//! default (`in-flight`) only nodes whose desired image is not yet reached block.
//!
//! One file per rule family: `images` (what a deletion removes), `scan` (the node rule),
//! `pools` (membership and the pool rule), `joining` (the joining-machine rule); `verdict`
//! is what they come to. `index` is the node rule's fast path (an index of nodes by digest,
//! and the decision over its candidates); `memo` memoises the scans over every node.

mod images;
mod index;
mod joining;
mod memo;
mod pools;
mod scan;
mod verdict;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::model::override_reason;
use crate::core::snapshot::Snapshot;

use images::GuardedImages;
pub use images::deleted_with;
pub use index::{NodeIndex, blocking_digests, evaluate_blocked, evaluate_indexed, guarded_digests};
pub use pools::{Membership, membership_labels};
pub use verdict::{
    BlockReason, Blocked, BlockingNode, Deletion, GuardedImage, JoiningMachine, NAMED_NEXT_NODES,
    PolicyMode, RollingPool, TargetKind, Verdict,
};

/// Decides whether `target` may be deleted given the rest of the cluster in `snapshot`.
pub fn evaluate(snapshot: &Snapshot, target: Deletion<'_>, mode: PolicyMode) -> Verdict {
    let (kind, meta, guarded) = guarded_images(snapshot, target);
    let members = Membership::new(&snapshot.pools);
    let blocking = scan::blocking_nodes(snapshot, &guarded, mode, &members);
    let rolling = pools::rolling_pools(snapshot, target, &guarded, &members);
    let joining = joining::joining_machines(snapshot, target, &guarded);
    verdict(
        snapshot,
        (kind, meta, mode),
        &guarded,
        blocking,
        rolling,
        joining,
    )
}

fn verdict(
    snapshot: &Snapshot,
    (kind, meta, mode): (TargetKind, &ObjectMeta, PolicyMode),
    guarded: &GuardedImages,
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
        images: guarded.listed(),
        blocking,
        rolling,
        joining,
        rules: snapshot.rules(),
    };
    v.allowed = !v.blocked() || v.override_reason.is_some();
    v
}

fn guarded_images<'a>(
    snapshot: &Snapshot,
    target: Deletion<'a>,
) -> (TargetKind, &'a ObjectMeta, GuardedImages) {
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
