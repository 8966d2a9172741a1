//! Where a cancelled node is on its way back (the daemon's no-op update: uncordon, then `Done`
//! with no reboot), read from the node as each step shows it. MCO may move the node on before the
//! daemon reports Done: uncordoned but still `Degraded`, it is a candidate in a pool with capacity
//! left, and the daemon's `SetDone` follows from its older copy. A new target that is exactly what
//! the node controller writes ([`crate::core::node_controller::pool_target`]) on an uncordoned
//! node is MCO moving on; any other new target on a node still `Degraded` is not.

use crate::core::model::node_annotations::{CURRENT_CONFIG, CURRENT_IMAGE, REASON};
use crate::core::model::trimmed;
use crate::core::node_controller::{PoolTarget, pool_target};
use crate::core::policy::Membership;
use crate::core::snapshot::Snapshot;

use super::marker::Marker;
use super::node::RecoveryNode;

/// What a cancelled node shows now, compared with the cancel its [`Marker`] records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// `Done` with an empty `reason`, schedulable, `desiredDrain` = `lastAppliedDrain` =
    /// `uncordon-<config>`, same boot: the recovery is complete.
    Recovered,
    /// The node's target is no longer the one the cancel set, and MCO set it: the node is no
    /// longer `Degraded` (its daemon finished the no-op update and MCO sent it the pool's next
    /// target), or it is, uncordoned, with exactly the target MCO's node controller writes to
    /// its pool's candidates (`degraded`: the daemon has not reported Done yet, and will).
    MovedOn {
        desired_config: Option<String>,
        desired_image: Option<String>,
        degraded: bool,
    },
    /// The node's target changed while it is still `Degraded` (or `Unreconcilable`), and not to
    /// what MCO's node controller writes on an uncordoned node: someone or something else wrote
    /// it. Not a recovery; stop, a person looks.
    Retargeted {
        desired_config: Option<String>,
        desired_image: Option<String>,
        state: String,
    },
    /// The node booted since the cancel: not the no-op update expected. Stop; a person looks.
    Rebooted {
        was: Option<String>,
        now: Option<String>,
    },
    /// Still on its way: the steps not done yet, in words ("state=Degraded (want Done)", ...;
    /// the annotations by their short names).
    Waiting(Vec<String>),
}

/// Whether `node` is still as `marker`'s cancel left it: its target is the marker's
/// `currentConfig` and `currentImage` (what the patch set), it runs that config, and it has not
/// booted since. A marker from an older recovery, after which MCO moved the node on or rebooted
/// it, does not hold.
pub fn cancel_holds(node: &RecoveryNode, marker: &Marker) -> bool {
    let config = trimmed(marker.annotations.get(CURRENT_CONFIG).map(String::as_str));
    config.is_some()
        && node.current_config() == config
        && matches!(
            progress_toward(node, marker, &PoolTarget::Unknown),
            Progress::Waiting(_) | Progress::Recovered
        )
}

/// The progress of `node` since the cancel `marker` records, with `objects` (the pools,
/// MachineOSConfigs and MachineOSBuilds read with it) telling what MCO's node controller
/// sends the node's pool now.
pub fn progress(node: &RecoveryNode, marker: &Marker, objects: &Snapshot) -> Progress {
    let members = Membership::new(&objects.pools);
    let target = members
        .primary(node)
        .and_then(|name| objects.pools.iter().find(|p| p.name() == name))
        .map_or(PoolTarget::Unknown, |pool| {
            pool_target(
                pool,
                &objects.machine_os_configs,
                &objects.machine_os_builds,
            )
        });
    progress_toward(node, marker, &target)
}

/// [`progress`], with `mco` what the node controller writes to a candidate of the node's pool.
fn progress_toward(node: &RecoveryNode, marker: &Marker, mco: &PoolTarget<'_>) -> Progress {
    let was = |key: &str| trimmed(marker.annotations.get(key).map(String::as_str));
    let config = was(CURRENT_CONFIG).unwrap_or_default();
    if node.boot_id != marker.boot_id {
        return Progress::Rebooted {
            was: marker.boot_id.clone(),
            now: node.boot_id.clone(),
        };
    }
    let uncordon = format!("uncordon-{config}");
    if node.desired_config() != Some(config) || node.desired_image() != was(CURRENT_IMAGE) {
        let (desired_config, desired_image) = (
            node.desired_config().map(str::to_string),
            node.desired_image().map(str::to_string),
        );
        // The daemon checks for its uncordon only every 10 s (`completeUpdate`), the drain
        // controller uncordons about 5 s after the request, and a pool sync follows about 5 s
        // later: in that window MCO may send the node the pool's target before `Done`.
        let by_mco =
            *mco == PoolTarget::Sends {
                config: node.desired_config().unwrap_or_default(),
                image: node.desired_image(),
            } && node.desired_drain() == Some(uncordon.as_str())
                && !node.unschedulable;
        return match node.state() {
            Some("Degraded") if by_mco => Progress::MovedOn {
                desired_config,
                desired_image,
                degraded: true,
            },
            Some(state @ ("Degraded" | "Unreconcilable")) => Progress::Retargeted {
                desired_config,
                desired_image,
                state: state.to_string(),
            },
            _ => Progress::MovedOn {
                desired_config,
                desired_image,
                degraded: false,
            },
        };
    }
    let mut waiting = Vec::new();
    if node.state() != Some("Done") {
        let state = node.state().unwrap_or("<none>");
        waiting.push(format!("state={state} (want Done)"));
    }
    if node.annotation(REASON).is_some() {
        waiting.push("reason set (want it cleared)".to_string());
    }
    for (key, value) in [
        ("desiredDrain", node.desired_drain()),
        ("lastAppliedDrain", node.last_applied_drain()),
    ] {
        if value != Some(uncordon.as_str()) {
            let value = value.unwrap_or("<none>");
            waiting.push(format!("{key}={value} (want {uncordon})"));
        }
    }
    if node.unschedulable {
        waiting.push("cordoned (want schedulable)".to_string());
    }
    if waiting.is_empty() {
        Progress::Recovered
    } else {
        Progress::Waiting(waiting)
    }
}
