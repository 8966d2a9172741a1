use super::*;
use serde_json::json;

fn machine(phase: &str, node: Option<&str>) -> Machine {
    serde_json::from_value(json!({
        "metadata": {"name": "m", "namespace": "openshift-machine-api"},
        "spec": {"providerSpec": {"value": {"userDataSecret": {"name": "worker-user-data"}}}},
        "status": {"phase": phase, "nodeRef": node.map(|n| json!({"kind": "Node", "name": n}))}
    }))
    .expect("machine")
}

fn cluster_version(value: serde_json::Value) -> ClusterVersion {
    serde_json::from_value(value).expect("cluster version")
}

#[test]
fn a_settled_cluster_runs_its_desired_release_alone() {
    let cv = cluster_version(json!({"status": {
        "desired": {"version": "4.23.1"},
        "history": [{"state": "Completed", "version": "4.23.1"}, {"state": "Completed", "version": "4.22.4"}],
        "conditions": [{"type": "Progressing", "status": "False"}]
    }}));
    let r = cv.release();
    assert_eq!(r.desired.as_deref(), Some("4.23.1"));
    assert!(r.also_running.is_empty() && !r.upgrading, "{r:?}");
}

#[test]
fn an_upgrade_in_flight_also_runs_every_release_back_to_the_newest_completed() {
    let partial = cluster_version(json!({"status": {
        "desired": {"version": "4.23.0"},
        "history": [{"state": "Partial", "version": "4.23.0"}, {"state": "Completed", "version": "4.22.4"},
                    {"state": "Completed", "version": "4.21.9"}]
    }}));
    let r = partial.release();
    assert!(r.upgrading);
    assert_eq!(r.also_running, ["4.22.4"], "not the older completed ones");
    // A second upgrade on top of one that never finished: both partial releases count.
    let chained = cluster_version(json!({"status": {
        "desired": {"version": "4.23.0"},
        "history": [{"state": "Partial", "version": "4.23.0"}, {"state": "Partial", "version": "4.22.4"},
                    {"state": "Completed", "version": "4.21.9"}]
    }}));
    assert_eq!(chained.release().also_running, ["4.22.4", "4.21.9"]);
    // Progressing=True with the history not yet showing the new entry.
    let requested = cluster_version(json!({"status": {
        "desired": {"version": "4.23.0"},
        "history": [{"state": "Completed", "version": "4.22.4"}],
        "conditions": [{"type": "Progressing", "status": "True"}]
    }}));
    let r = requested.release();
    assert!(r.upgrading);
    assert_eq!(r.also_running, ["4.22.4"]);
    // No history at all (a trimmed dump): the desired release alone.
    let bare = cluster_version(json!({"status": {"desired": {"version": "4.20.8"}}}));
    assert!(bare.release().also_running.is_empty());
}

#[test]
fn joining_is_provisioning_or_provisioned_without_a_node() {
    for (phase, node, joining) in [
        ("Provisioning", None, true),
        ("Provisioned", None, true),
        ("Provisioned", Some("n"), false),
        ("Running", None, false),
        ("Deleting", None, false),
        ("Failed", None, false),
    ] {
        assert_eq!(
            machine(phase, node).is_joining(),
            joining,
            "{phase} {node:?}"
        );
    }
    assert_eq!(
        machine("Running", None).user_data_secret(),
        Some("worker-user-data")
    );
}
