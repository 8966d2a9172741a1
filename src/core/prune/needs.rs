//! The guard's own verdict on deleting the build, as reasons to keep it: a build the policy
//! would refuse to delete is never deletable. The verdict is the policy's in `in-use` mode,
//! whose refusals include `in-flight`'s, so the webhook agrees whichever mode it runs in; the
//! override annotation does not make a build deletable (the plan reads `blocked`, not
//! `allowed`).

use crate::core::image::abbreviate;
use crate::core::policy::{BlockReason, Verdict};

use super::{Keep, Planned, nodes_do};

pub(super) fn add(build: &mut Planned, verdict: &Verdict) {
    let by = |reason: BlockReason| -> Vec<&str> {
        verdict
            .blocking
            .iter()
            .filter(|n| n.reason == reason)
            .map(|n| n.node.as_str())
            .collect()
    };
    for (names, verbs, what) in [
        (by(BlockReason::InUse), ("runs", "run"), "its image"),
        (
            by(BlockReason::InFlight),
            ("is updating to", "are updating to"),
            "its image (desiredImage, not reached yet)",
        ),
    ] {
        if !names.is_empty() {
            build.keep(Keep::NodeNeedsImage, nodes_do(names, verbs, what));
        }
    }
    for pool in &verdict.rolling {
        let pending = pool
            .pending_nodes
            .map(|n| format!(": {} of its nodes do not run it yet", n))
            .unwrap_or_default();
        build.keep(
            Keep::PoolRollingOut,
            format!(
                "pool {} is rolling out its image {}{pending}",
                pool.pool,
                abbreviate(&pool.image)
            ),
        );
    }
    for machine in &verdict.joining {
        build.keep(
            Keep::JoiningMachine,
            format!(
                "machine {} ({}) joining pool {} would pull its image at first boot",
                machine.machine, machine.phase, machine.pool
            ),
        );
    }
}
