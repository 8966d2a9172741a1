use super::*;
use serde_json::json;

#[test]
fn keeps_mco_annotations_the_marker_spec_and_boot_id_only() {
    let node: RecoveryNode = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "w0", "uid": "u-1", "resourceVersion": "7",
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {STATE: "Degraded", DESIRED_DRAIN: "drain-rendered-a",
                MARKER: "{}", "k8s.ovn.org/node-subnets": "{\"default\":[]}"},
            "managedFields": [{"manager": "kubelet"}]},
        "spec": {"unschedulable": true, "providerID": "aws:///x"},
        "status": {"nodeInfo": {"bootID": "b-1", "kernelVersion": "5.14"}}
    }))
    .expect("decodes");
    assert_eq!(node.name, "w0");
    assert_eq!(node.uid.as_deref(), Some("u-1"));
    assert_eq!(node.state(), Some("Degraded"));
    assert_eq!(node.desired_drain(), Some("drain-rendered-a"));
    assert_eq!(
        node.annotations.keys().collect::<Vec<_>>(),
        [DESIRED_DRAIN, STATE, MARKER]
    );
    assert_eq!(node.mco_annotations().len(), 2, "the marker is not MCO's");
    assert!(node.unschedulable);
    assert_eq!(node.boot_id.as_deref(), Some("b-1"));
    assert_eq!(node.label("node-role.kubernetes.io/worker"), Some(""));
    let again: RecoveryNode =
        serde_json::from_value(serde_json::to_value(&node).expect("encodes")).expect("decodes");
    assert_eq!(again, node);
}

#[test]
fn a_bare_node_decodes_schedulable_without_annotations() {
    let node: RecoveryNode =
        serde_json::from_value(json!({"metadata": {"name": "n"}})).expect("decodes");
    assert!(!node.unschedulable);
    assert_eq!(node.state(), None);
    assert!(!node.single_node());
    let wrong = json!({"metadata": {"name": "n", "annotations": {STATE: 3}}});
    assert!(serde_json::from_value::<RecoveryNode>(wrong).is_err());
}

#[test]
fn only_single_replica_is_single_node() {
    let with = |v: &str| RecoveryNode {
        annotations: [(CONTROL_PLANE_TOPOLOGY.to_string(), v.to_string())].into(),
        ..Default::default()
    };
    assert!(with("SingleReplica").single_node());
    for other in [
        "HighlyAvailable",
        "HighlyAvailableArbiter",
        "DualReplica",
        "External",
        "",
    ] {
        assert!(!with(other).single_node(), "{other}");
    }
}
