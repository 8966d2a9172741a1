//! The rules put together: [`evaluate`] decides a deletion from every node of a snapshot;
//! [`super::index`] decides the same from the nodes an index names, with the same pieces.

use crate::core::model::override_reason;
use crate::core::snapshot::Snapshot;

use super::images::{GuardedImages, guarded_images};
use super::pools::{self, Membership};
use super::verdict::{
    BlockingNode, Deletion, JoiningMachine, PolicyMode, RollingPool, TargetKind, Verdict,
};
use super::{joining, scan};

/// Decides whether `target` may be deleted given the rest of the cluster in `snapshot`.
pub fn evaluate(snapshot: &Snapshot, target: Deletion<'_>, mode: PolicyMode) -> Verdict {
    let guarded = guarded_images(snapshot, target);
    let members = Membership::new(&snapshot.pools);
    let blocking = scan::blocking_nodes(snapshot, &guarded, mode, &members);
    let rolling = pools::rolling_pools(snapshot, target, &guarded, &members);
    let joining = joining::joining_machines(snapshot, target, &guarded);
    verdict(snapshot, target, mode, &guarded, blocking, rolling, joining)
}

pub(super) fn verdict(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
    guarded: &GuardedImages,
    blocking: Vec<BlockingNode>,
    rolling: Vec<RollingPool>,
    joining: Vec<JoiningMachine>,
) -> Verdict {
    let (kind, meta) = match target {
        Deletion::MachineOSConfig(mosc) => (TargetKind::MachineOSConfig, &mosc.metadata),
        Deletion::MachineOSBuild(mosb) => (TargetKind::MachineOSBuild, &mosb.metadata),
    };
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
