//! Which of a pool's candidate nodes MCO's node controller sends the pool's target, in its order
//! (`getAllCandidateMachines`, `updateCandidateMachines`, `filterControlPlaneCandidateNodes`,
//! `sortNodeList`; node_controller.go, the same on release-4.20 to main):
//! - candidates come in the order the node lister returns them, a Go map's: no order, another
//!   on every pass (here a pseudo-random order drawn from the pass number);
//! - in the `master` pool, with more than one candidate, the node running the
//!   machine-config-operator's pod is deferred (dropped this pass: it goes last); the harness
//!   runs no operator pod, so only a test that names one ([`super::Simulator::set_operator_node`])
//!   plays it (MCO logs and goes on when it finds none);
//! - only when there are more candidates than capacity are they sorted, by the
//!   `topology.kubernetes.io/zone` label (labelled ones first, by zone), then oldest first by
//!   creation (`sort.Slice`, not stable: ties keep no particular order), and the first
//!   `capacity` taken.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::Node;

use crate::mco::ZONE_LABEL;

/// The candidates of one pass (`turn`) that get the pool's target, in the order MCO writes
/// them: at most `capacity`.
pub(super) fn choose<'n>(
    mut candidates: Vec<&'n Node>,
    capacity: usize,
    master_pool: bool,
    operator_node: Option<&str>,
    turn: usize,
) -> Vec<&'n Node> {
    // The lister's order: none in particular, another each pass.
    candidates.sort_by_key(|n| {
        let mut h = DefaultHasher::new();
        (turn, n.metadata.name.as_deref()).hash(&mut h);
        h.finish()
    });
    if master_pool && candidates.len() > 1 {
        candidates
            .retain(|n| operator_node.is_none_or(|op| n.metadata.name.as_deref() != Some(op)));
    }
    if capacity < candidates.len() {
        candidates.sort_by(|a, b| {
            let zone = |n: &Node| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(ZONE_LABEL))
                    .cloned()
            };
            let created = |n: &Node| n.metadata.creation_timestamp.as_ref().map(|t| t.0);
            // Labelled nodes first (by zone), unlabelled last; then oldest first.
            (zone(a).is_none(), zone(a), created(a)).cmp(&(zone(b).is_none(), zone(b), created(b)))
        });
        candidates.truncate(capacity);
    }
    candidates
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, zone: Option<&str>, created: &str) -> Node {
        let labels = zone.map(|z| json!({ZONE_LABEL: z})).unwrap_or(json!({}));
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels,
            "creationTimestamp": created}}))
        .expect("node")
    }

    fn names(nodes: &[&Node]) -> Vec<String> {
        nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    /// Over capacity: by zone, unlabelled last, oldest first; never by name (a simulator that
    /// sorted by name would pick `a-*` here).
    #[test]
    fn over_capacity_by_zone_then_age_not_by_name() {
        let nodes = [
            node("a-unzoned-old", None, "2026-01-01T00:00:00Z"),
            node("b-zone-2", Some("us-east-2b"), "2026-01-01T00:00:00Z"),
            node("c-zone-1-new", Some("us-east-2a"), "2026-03-01T00:00:00Z"),
            node("d-zone-1-old", Some("us-east-2a"), "2026-02-01T00:00:00Z"),
        ];
        for turn in 0..8 {
            let chosen = choose(nodes.iter().collect(), 3, false, None, turn);
            assert_eq!(
                names(&chosen),
                ["d-zone-1-old", "c-zone-1-new", "b-zone-2"],
                "{turn}"
            );
        }
        let unzoned = [
            node("a", None, "2026-03-01T00:00:00Z"),
            node("z", None, "2026-01-01T00:00:00Z"),
        ];
        assert_eq!(
            names(&choose(unzoned.iter().collect(), 1, false, None, 0)),
            ["z"]
        );
    }

    /// Within capacity every candidate is sent, in the lister's order, which changes from pass
    /// to pass.
    #[test]
    fn within_capacity_all_in_no_particular_order() {
        let nodes: Vec<Node> = (0..6)
            .map(|i| node(&format!("n{i}"), None, "2026-01-01T00:00:00Z"))
            .collect();
        let orders: std::collections::BTreeSet<Vec<String>> = (0..16)
            .map(|turn| names(&choose(nodes.iter().collect(), 6, false, None, turn)))
            .collect();
        assert!(orders.iter().all(|o| o.len() == 6));
        assert!(orders.len() > 1, "the order changes between passes");
    }

    /// The operator's node is deferred in the master pool while another candidate exists.
    #[test]
    fn the_operators_node_goes_last_in_the_master_pool() {
        let nodes = [
            node("m0", None, "2026-01-01T00:00:00Z"),
            node("m1", None, "2026-01-02T00:00:00Z"),
        ];
        for turn in 0..4 {
            assert_eq!(
                names(&choose(nodes.iter().collect(), 1, true, Some("m0"), turn)),
                ["m1"]
            );
            assert_eq!(
                names(&choose(
                    nodes[..1].iter().collect(),
                    1,
                    true,
                    Some("m0"),
                    turn
                )),
                ["m0"]
            );
            assert_eq!(
                names(&choose(nodes.iter().collect(), 1, false, Some("m0"), turn)),
                ["m0"]
            );
        }
    }
}
