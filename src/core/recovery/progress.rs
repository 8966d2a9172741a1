//! Where a cancelled node is on its way back: what the daemon's no-op update does after the
//! cancel (`completeUpdate` asks the drain controller to uncordon, `SetDone` sets `state=Done` and
//! clears `reason`, with no reboot), read from the node as each step shows it.

use crate::core::model::node_annotations::{CURRENT_CONFIG, CURRENT_IMAGE};
use crate::core::model::trimmed;

use super::marker::Marker;
use super::node::RecoveryNode;

/// What a cancelled node shows now, compared with the cancel its [`Marker`] records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// `Done` with an empty `reason`, schedulable, `desiredDrain` = `lastAppliedDrain` =
    /// `uncordon-<config>`, same boot: the recovery is complete.
    Recovered,
    /// The node's target is no longer the one the cancel set: MCO's node controller sends a
    /// new one only to a `Done`, schedulable node, so the no-op update finished between two
    /// reads and MCO moved on (its revert, or the pool's next config).
    MovedOn {
        desired_config: Option<String>,
        desired_image: Option<String>,
    },
    /// The node's target changed while it is still `Degraded` (or `Unreconcilable`): MCO sends
    /// a new target only to a `Done` node, so someone or something else wrote it. Not a
    /// recovery; stop, a person looks.
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
            progress(node, marker),
            Progress::Waiting(_) | Progress::Recovered
        )
}

/// The progress of `node` since the cancel `marker` records.
pub fn progress(node: &RecoveryNode, marker: &Marker) -> Progress {
    let was = |key: &str| trimmed(marker.annotations.get(key).map(String::as_str));
    let config = was(CURRENT_CONFIG).unwrap_or_default();
    if node.boot_id != marker.boot_id {
        return Progress::Rebooted {
            was: marker.boot_id.clone(),
            now: node.boot_id.clone(),
        };
    }
    if node.desired_config() != Some(config) || node.desired_image() != was(CURRENT_IMAGE) {
        let (desired_config, desired_image) = (
            node.desired_config().map(str::to_string),
            node.desired_image().map(str::to_string),
        );
        return match node.state() {
            Some(state @ ("Degraded" | "Unreconcilable")) => Progress::Retargeted {
                desired_config,
                desired_image,
                state: state.to_string(),
            },
            _ => Progress::MovedOn {
                desired_config,
                desired_image,
            },
        };
    }
    let uncordon = format!("uncordon-{config}");
    let mut waiting = Vec::new();
    if node.state() != Some("Done") {
        waiting.push(format!("state={} (want Done)", shown(node.state())));
    }
    if node.reason().is_some() {
        waiting.push("reason set (want it cleared)".to_string());
    }
    for (key, value) in [
        ("desiredDrain", node.desired_drain()),
        ("lastAppliedDrain", node.last_applied_drain()),
    ] {
        if value != Some(uncordon.as_str()) {
            waiting.push(format!("{key}={} (want {uncordon})", shown(value)));
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

fn shown(value: Option<&str>) -> &str {
    value.unwrap_or("<none>")
}
