//! What one pass of a node's daemon does, decided from the node's annotations and what the
//! machine runs ([`Disk`]), as MCO's `syncNode` and `prepUpdateFromCluster` (pkg/daemon/
//! daemon.go, release-4.20) and `update` and `performDrain` (update.go, drain.go) decide it. Pure:
//! [`plan`] is table-tested here; [`super::update`] carries a plan out.

use k8s_openapi::api::core::v1::Node;

use crate::mco::{
    CONTROL_PLANE_TOPOLOGY, CURRENT_CONFIG, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE,
    LAST_APPLIED_DRAIN, STATE, STATE_DEGRADED, STATE_DONE, STATE_UNRECONCILABLE,
    TOPOLOGY_SINGLE_REPLICA, drain_request, raw_annotation as annotation,
};

/// What the machine runs: the daemon's on-disk `currentconfig` and `currentimage`, which
/// override the node's currentConfig and currentImage annotations (a hand edit of those does
/// not change what the daemon compares against).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Disk {
    pub config: String,
    pub image: Option<String>,
}

/// What the machine should run: the node's desiredConfig and desiredImage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Goal {
    pub config: String,
    pub image: Option<String>,
}

/// One pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pass {
    /// Done, and the machine runs what it is told to: nothing to do.
    Idle,
    /// A drain or uncordon request is not carried out yet ("A previously requested drain has
    /// not yet completed"): wait for the drain controller.
    AwaitDrain,
    /// A rendered MachineConfig the node names does not exist (`prepUpdateFromCluster` fails
    /// before looking at anything else): Degraded with this reason.
    MissingConfig(String),
    Update(Update),
}

/// An update (`triggerUpdate` → `update`) from the machine's [`Disk`] to [`Goal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Update {
    pub goal: Goal,
    /// `SetWorking` first: not while Degraded or Unreconcilable (a retry keeps the state).
    pub set_working: bool,
    /// The drain to request: `None` for an update that changes nothing, on a single-node
    /// cluster (`drainRequired`), or when `lastAppliedDrain` already says this drain
    /// (`performDrain`: "drain is already completed on this node").
    pub drain: Option<String>,
    /// What changes on the machine (a rebase or a config, then a reboot); `None`: nothing (the
    /// update only uncordons and reports Done, no reboot).
    pub change: Option<Change>,
}

/// What an update changes on the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// Rebase to this layered image (pulled from the registry).
    Rebase(String),
    /// Leave the layered image for the rendered config's base OS image (no registry needed).
    LeaveImage,
    /// Only the rendered config changes.
    Config,
}

/// The pass of the daemon of `node`, whose machine runs `disk`; `config_exists` says whether a
/// rendered MachineConfig of that name exists.
pub(super) fn plan(node: &Node, disk: &Disk, config_exists: impl Fn(&str) -> bool) -> Pass {
    let desired_drain = annotation(node, DESIRED_DRAIN);
    if !desired_drain.is_empty() && desired_drain != annotation(node, LAST_APPLIED_DRAIN) {
        return Pass::AwaitDrain;
    }
    let desired_config = annotation(node, DESIRED_CONFIG);
    let current_config = annotation(node, CURRENT_CONFIG);
    for name in [desired_config, current_config] {
        if !config_exists(name) {
            return Pass::MissingConfig(format!(
                "missing MachineConfig {name}\nmachineconfig.machineconfiguration.openshift.io \
                 \"{name}\" not found"
            ));
        }
    }
    let goal = Goal {
        config: desired_config.to_owned(),
        image: Some(annotation(node, DESIRED_IMAGE))
            .filter(|i| !i.is_empty())
            .map(str::to_owned),
    };
    let state = annotation(node, STATE);
    let on_disk = disk.config == current_config;
    if on_disk
        && goal.image == disk.image
        && desired_config == current_config
        && state == STATE_DONE
    {
        return Pass::Idle;
    }
    let change = if goal.image != disk.image {
        Some(match &goal.image {
            Some(image) => Change::Rebase(image.clone()),
            None => Change::LeaveImage,
        })
    } else {
        (goal.config != disk.config).then_some(Change::Config)
    };
    let request = drain_request(&goal.config);
    let single_node = annotation(node, CONTROL_PLANE_TOPOLOGY) == TOPOLOGY_SINGLE_REPLICA;
    let drain =
        (change.is_some() && !single_node && annotation(node, LAST_APPLIED_DRAIN) != request)
            .then_some(request);
    Pass::Update(Update {
        goal,
        set_working: !matches!(state, STATE_DEGRADED | STATE_UNRECONCILABLE),
        drain,
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mco::{CURRENT_IMAGE, uncordon_request};
    use serde_json::{Value, json};

    const R1: &str = "rendered-worker-1";
    const R2: &str = "rendered-worker-2";
    const IMAGE: &str = "registry.example.com/ocb-image@sha256:aaaa";

    fn node(annotations: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n", "annotations": annotations}}))
            .expect("node")
    }

    fn disk(config: &str, image: Option<&str>) -> Disk {
        Disk {
            config: config.into(),
            image: image.map(str::to_owned),
        }
    }

    fn update(
        config: &str,
        image: Option<&str>,
        working: bool,
        drain: Option<&str>,
        change: Option<Change>,
    ) -> Pass {
        Pass::Update(Update {
            goal: Goal {
                config: config.into(),
                image: image.map(str::to_owned),
            },
            set_working: working,
            drain: drain.map(str::to_owned),
            change,
        })
    }

    /// An update rebasing node R1 to IMAGE.
    fn rebase(working: bool, drain: Option<&str>) -> Pass {
        update(
            R1,
            Some(IMAGE),
            working,
            drain,
            Some(Change::Rebase(IMAGE.into())),
        )
    }

    /// The path a node the bug hurt takes, pass by pass, and its neighbours.
    #[test]
    fn each_pass_as_syncnode_decides_it() {
        let drained = drain_request(R1);
        let stuck = json!({STATE: "Degraded", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE,
                           DESIRED_DRAIN: drained, LAST_APPLIED_DRAIN: drained});
        let mut cancelled = stuck.clone();
        cancelled
            .as_object_mut()
            .expect("object")
            .remove(DESIRED_IMAGE);
        let mut sno =
            json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE});
        sno[CONTROL_PLANE_TOPOLOGY] = json!(TOPOLOGY_SINGLE_REPLICA);
        let rows: Vec<(&str, Value, Disk, Pass)> = vec![
            (
                "settled",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1}),
                disk(R1, None),
                Pass::Idle,
            ),
            (
                "settled on an image",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE, CURRENT_IMAGE: IMAGE}),
                disk(R1, Some(IMAGE)),
                Pass::Idle,
            ),
            (
                "targeted an image",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE}),
                disk(R1, None),
                rebase(true, Some(&drained)),
            ),
            (
                "drain requested, not done",
                json!({STATE: "Working", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE, DESIRED_DRAIN: drained,
                    LAST_APPLIED_DRAIN: uncordon_request(R1)}),
                disk(R1, None),
                Pass::AwaitDrain,
            ),
            (
                "a failed rebase retried: no Working, no second drain",
                stuck.clone(),
                disk(R1, None),
                rebase(false, None),
            ),
            (
                "the target cancelled: nothing to change, no drain, no reboot",
                cancelled,
                disk(R1, None),
                update(R1, None, false, None, None),
            ),
            (
                "the target cancelled to the current image",
                json!({STATE: "Degraded", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE, CURRENT_IMAGE: IMAGE}),
                disk(R1, Some(IMAGE)),
                update(R1, Some(IMAGE), false, None, None),
            ),
            (
                "only state=Done written by hand: the image still differs",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE,
                    DESIRED_DRAIN: drained, LAST_APPLIED_DRAIN: drained}),
                disk(R1, None),
                rebase(true, None),
            ),
            (
                "currentImage written by hand: the disk says otherwise",
                json!({STATE: "Degraded", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE, CURRENT_IMAGE: IMAGE,
                    DESIRED_DRAIN: drained, LAST_APPLIED_DRAIN: drained}),
                disk(R1, None),
                rebase(false, None),
            ),
            (
                "leaving image mode",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, CURRENT_IMAGE: IMAGE}),
                disk(R1, Some(IMAGE)),
                update(R1, None, true, Some(&drained), Some(Change::LeaveImage)),
            ),
            (
                "a config change",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R2}),
                disk(R1, None),
                update(
                    R2,
                    None,
                    true,
                    Some(&drain_request(R2)),
                    Some(Change::Config),
                ),
            ),
            (
                "single node: no drain",
                sno,
                disk(R1, None),
                rebase(true, None),
            ),
            (
                "its rendered config deleted",
                json!({STATE: "Done", CURRENT_CONFIG: R1, DESIRED_CONFIG: R2}),
                disk(R1, None),
                Pass::MissingConfig(format!(
                    "missing MachineConfig {R2}\nmachineconfig.machineconfiguration.openshift.io \"{R2}\" not found"
                )),
            ),
        ];
        for (what, annotations, on_disk, expected) in rows {
            let got = plan(&node(annotations), &on_disk, |name| {
                name != R2 || what != "its rendered config deleted"
            });
            assert_eq!(got, expected, "{what}");
        }
    }
}
