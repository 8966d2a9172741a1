//! How MCO reads a node's state (`LayeredNodeState`, `pkg/controller/common/
//! layered_node_state.go`, release-4.20): done, ready, failing, unavailable for an update, a
//! candidate for its pool's target. The node controller ([`super::nodes`]: `getAllCandidateMachines`)
//! and the pool status ([`super::pools`]: `calculateStatus`) decide by these functions only.

use k8s_openapi::api::core::v1::Node;

use crate::mco::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE, STATE_DEGRADED,
    STATE_DONE, STATE_UNRECONCILABLE,
};

/// What a pool's nodes should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub config: String,
    /// `None`: not layered (no MOSC), so no desiredImage.
    pub image: Option<String>,
}

/// An annotation as MCO's `node.Annotations[key]` reads it: present (maybe empty) or absent.
fn raw<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `IsNodeDone`: currentConfig and desiredConfig set and equal, the image done
/// (`isNodeImageDone`) and the daemon's state Done.
pub(super) fn is_done(node: &Node) -> bool {
    let config_done = match (raw(node, CURRENT_CONFIG), raw(node, DESIRED_CONFIG)) {
        (Some(current), Some(desired)) => !current.is_empty() && current == desired,
        _ => false,
    };
    let image_done = match (raw(node, DESIRED_IMAGE), raw(node, CURRENT_IMAGE)) {
        (None, None) => true,
        (Some(desired), Some(current)) => !desired.is_empty() && desired == current,
        _ => false,
    };
    config_done && image_done && raw(node, STATE) == Some(STATE_DONE)
}

/// `CheckNodeReady`: the kubelet's Ready condition True, DiskPressure and NetworkUnavailable
/// False (where reported), and the node schedulable.
pub(super) fn is_ready(node: &Node) -> bool {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let healthy = conditions.iter().all(|c| match c.type_.as_str() {
        "Ready" => c.status == "True",
        "DiskPressure" | "NetworkUnavailable" => c.status == "False",
        _ => true,
    });
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    healthy && !unschedulable
}

/// `IsNodeMCDFailing`: Degraded or Unreconcilable while its currentConfig differs from its
/// desiredConfig (a node stuck on an image alone is not "failing").
pub(super) fn is_failing(node: &Node) -> bool {
    raw(node, CURRENT_CONFIG) != raw(node, DESIRED_CONFIG)
        && matches!(
            raw(node, STATE),
            Some(STATE_DEGRADED | STATE_UNRECONCILABLE)
        )
}

/// `IsUnavailableForUpdate`: not ready (unschedulable above all), or not done unless failing.
/// Each such node uses one of the pool's `maxUnavailable`.
pub(super) fn is_unavailable(node: &Node) -> bool {
    !is_ready(node) || (!is_done(node) && !is_failing(node))
}

/// `CheckNodeCandidacyForUpdate`: the node does not target `target` yet (layered: its
/// desiredImage and desiredConfig are the build's; otherwise its desiredConfig is the pool's
/// and it carries no desiredImage annotation, even an empty one).
pub(super) fn is_candidate(node: &Node, target: &Target) -> bool {
    let config_targeted = raw(node, DESIRED_CONFIG) == Some(target.config.as_str());
    match &target.image {
        Some(image) => !(config_targeted && raw(node, DESIRED_IMAGE) == Some(image.as_str())),
        None => !config_targeted || raw(node, DESIRED_IMAGE).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const R1: &str = "rendered-worker-1";
    const R2: &str = "rendered-worker-2";
    const IMAGE: &str = "registry.example.com/ocb-image@sha256:aaaa";

    fn node(annotations: serde_json::Value, unschedulable: bool, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": annotations},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("node")
    }

    fn annotated(
        state: &str,
        current: &str,
        desired: &str,
        images: (Option<&str>, Option<&str>),
    ) -> serde_json::Value {
        let mut a = json!({STATE: state, CURRENT_CONFIG: current, DESIRED_CONFIG: desired});
        if let Some(d) = images.0 {
            a[DESIRED_IMAGE] = json!(d);
        }
        if let Some(c) = images.1 {
            a[CURRENT_IMAGE] = json!(c);
        }
        a
    }

    /// One row per case MCO's node controller tells apart: (what, annotations, unschedulable,
    /// Ready, done, failing, unavailable).
    #[test]
    fn unavailable_as_getallcandidatemachines_counts_it() {
        let rows = [
            (
                "settled",
                annotated("Done", R1, R1, (None, None)),
                false,
                "True",
                true,
                false,
                false,
            ),
            (
                "settled on an image",
                annotated("Done", R1, R1, (Some(IMAGE), Some(IMAGE))),
                false,
                "True",
                true,
                false,
                false,
            ),
            (
                "targeted, daemon not started",
                annotated("Done", R1, R2, (None, None)),
                false,
                "True",
                false,
                false,
                true,
            ),
            (
                "targeted an image",
                annotated("Done", R1, R1, (Some(IMAGE), None)),
                false,
                "True",
                false,
                false,
                true,
            ),
            (
                "working, cordoned",
                annotated("Working", R1, R1, (Some(IMAGE), None)),
                true,
                "True",
                false,
                false,
                true,
            ),
            (
                "stuck on an image, cordoned",
                annotated("Degraded", R1, R1, (Some(IMAGE), None)),
                true,
                "True",
                false,
                false,
                true,
            ),
            (
                "stuck on an image, uncordoned by hand",
                annotated("Degraded", R1, R1, (Some(IMAGE), None)),
                false,
                "True",
                false,
                false,
                true,
            ),
            (
                "failing a config, schedulable",
                annotated("Degraded", R1, R2, (None, None)),
                false,
                "True",
                false,
                true,
                false,
            ),
            (
                "unreconcilable config, cordoned",
                annotated("Unreconcilable", R1, R2, (None, None)),
                true,
                "True",
                false,
                true,
                true,
            ),
            (
                "settled but cordoned",
                annotated("Done", R1, R1, (None, None)),
                true,
                "True",
                true,
                false,
                true,
            ),
            (
                "settled but NotReady",
                annotated("Done", R1, R1, (None, None)),
                false,
                "False",
                true,
                false,
                true,
            ),
            (
                "empty desiredImage (a rollback)",
                annotated("Done", R1, R1, (Some(""), Some(IMAGE))),
                false,
                "True",
                false,
                false,
                true,
            ),
        ];
        for (what, annotations, unschedulable, ready, done, failing, unavailable) in rows {
            let n = node(annotations, unschedulable, ready);
            assert_eq!(is_done(&n), done, "{what}: done");
            assert_eq!(is_failing(&n), failing, "{what}: failing");
            assert_eq!(is_unavailable(&n), unavailable, "{what}: unavailable");
        }
    }

    #[test]
    fn a_candidate_does_not_target_the_pools_target_yet() {
        let layered = Target {
            config: R1.into(),
            image: Some(IMAGE.into()),
        };
        let plain = Target {
            config: R1.into(),
            image: None,
        };
        let rows = [
            (
                "no image, layered pool",
                annotated("Done", R1, R1, (None, None)),
                true,
                false,
            ),
            (
                "targets the image",
                annotated("Done", R1, R1, (Some(IMAGE), None)),
                false,
                true,
            ),
            (
                "other config",
                annotated("Done", R2, R2, (Some(IMAGE), Some(IMAGE))),
                true,
                true,
            ),
            (
                "left-over empty desiredImage",
                annotated("Done", R1, R1, (Some(""), None)),
                true,
                true,
            ),
        ];
        for (what, annotations, to_layered, to_plain) in rows {
            let n = node(annotations, false, "True");
            assert_eq!(is_candidate(&n, &layered), to_layered, "{what}: layered");
            assert_eq!(is_candidate(&n, &plain), to_plain, "{what}: not layered");
        }
    }
}
