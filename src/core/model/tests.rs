use super::*;
use serde_json::json;

#[test]
fn unknown_and_missing_fields_are_tolerated() {
    let mosc: MachineOSConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": "worker"},
        "spec": {"machineConfigPool": {"name": "worker"}, "imageBuilder": {"imageBuilderType": "Job"}},
        "status": {"somethingNew": [1, 2]}
    }))
    .expect("tolerant decode");
    assert_eq!(mosc.name(), "worker");
    assert!(mosc.status.current_image_pull_spec.is_none());
    let empty: MachineOSBuild = serde_json::from_value(json!({})).expect("empty object");
    assert_eq!(empty.name(), "");
}

#[test]
fn build_membership_by_spec_or_label() {
    let by_label: MachineOSBuild = serde_json::from_value(json!({
        "metadata": {"name": "b", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}}
    }))
    .expect("decode");
    let by_spec: MachineOSBuild = serde_json::from_value(json!({
        "metadata": {"name": "b"}, "spec": {"machineOSConfig": {"name": "worker"}}
    }))
    .expect("decode");
    assert!(by_label.belongs_to("worker") && by_spec.belongs_to("worker"));
    assert!(!by_label.belongs_to("infra"));
}

#[test]
fn blank_override_is_not_an_override() {
    let meta = ObjectMeta {
        annotations: Some([(OVERRIDE_ANNOTATION.to_string(), "  ".to_string())].into()),
        ..Default::default()
    };
    assert_eq!(override_reason(&meta), None);
}
