//! ClusterVersion, as strict as the release CRD on what it requires: `spec.clusterID`; in
//! `status` `availableUpdates` (nullable), `desired` (`image`, `version`), `observedGeneration`
//! and `versionHash`; in every `history[]` entry `completionTime` (nullable), `image`,
//! `startedTime`, `state` (Completed or Partial) and `verified`; in every condition
//! `lastTransitionTime`, `status` and `type`. The control plane's own ClusterVersion (written by
//! the kit at start) is the object each case patches: a rejected patch leaves it as it was.

use serde_json::{Value, json};

use testkit::clusterversion::{self, release_image};
use testkit::controlplane::ControlPlane;

use super::{Case, Op, with};

/// The existing singleton (only its kind and name are read).
fn version() -> Value {
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
           "metadata": {"name": "version"}})
}

/// A history entry as the cluster-version operator writes it.
fn entry() -> Value {
    json!({"state": "Completed", "startedTime": "2026-11-30T10:00:00Z",
           "completionTime": "2026-11-30T10:40:00Z", "version": "4.20.15",
           "image": release_image("4.20.15"), "verified": false})
}

/// A condition as the operator writes it.
fn condition() -> Value {
    json!({"type": "Progressing", "status": "False", "lastTransitionTime": "2026-11-30T10:40:00Z",
           "message": "Cluster version is 4.20.15"})
}

/// A status patch setting `history` to one entry with `pointer` (in it) set to `value`.
fn history_with(pointer: &str, value: Value) -> Op {
    Op::PatchStatus(
        version(),
        json!({"history": [with(entry(), pointer, value)]}),
    )
}

/// A status patch setting `conditions` to one condition with `pointer` set to `value`.
fn condition_with(pointer: &str, value: Value) -> Op {
    Op::PatchStatus(
        version(),
        json!({"conditions": [with(condition(), pointer, value)]}),
    )
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        (
            "ClusterVersion named other than version",
            Op::Create(with(
                with(version(), "/metadata/name", json!("other")),
                "/spec",
                json!({"clusterID": "00000000-0000-4000-8000-000000000e2e"}),
            )),
            "the ClusterVersion is a singleton named version",
        ),
        (
            "ClusterVersion without spec.clusterID",
            Op::Patch(version(), json!({"spec": {"clusterID": null}})),
            "spec.clusterID: Required value",
        ),
        (
            "ClusterVersion status without availableUpdates",
            Op::PatchStatus(version(), json!({"availableUpdates": null})),
            "status.availableUpdates: Required value",
        ),
        (
            "ClusterVersion status without desired",
            Op::PatchStatus(version(), json!({"desired": null})),
            "status.desired: Required value",
        ),
        (
            "ClusterVersion desired without image",
            Op::PatchStatus(version(), json!({"desired": {"image": null}})),
            "status.desired.image: Required value",
        ),
        (
            "ClusterVersion desired without version",
            Op::PatchStatus(version(), json!({"desired": {"version": null}})),
            "status.desired.version: Required value",
        ),
        (
            "ClusterVersion status without observedGeneration",
            Op::PatchStatus(version(), json!({"observedGeneration": null})),
            "status.observedGeneration: Required value",
        ),
        (
            "ClusterVersion status without versionHash",
            Op::PatchStatus(version(), json!({"versionHash": null})),
            "status.versionHash: Required value",
        ),
        (
            "ClusterVersion history entry without completionTime",
            history_with("/completionTime", Value::Null),
            "status.history[0].completionTime: Required value",
        ),
        (
            "ClusterVersion history entry without image",
            history_with("/image", Value::Null),
            "status.history[0].image: Required value",
        ),
        (
            "ClusterVersion history entry without startedTime",
            history_with("/startedTime", Value::Null),
            "status.history[0].startedTime: Required value",
        ),
        (
            "ClusterVersion history entry without state",
            history_with("/state", Value::Null),
            "status.history[0].state: Required value",
        ),
        (
            "ClusterVersion history entry without verified",
            history_with("/verified", Value::Null),
            "status.history[0].verified: Required value",
        ),
        (
            "ClusterVersion history state other than Completed or Partial",
            history_with("/state", json!("Failed")),
            "supported values: \"Completed\", \"Partial\"",
        ),
        (
            "ClusterVersion condition without lastTransitionTime",
            condition_with("/lastTransitionTime", Value::Null),
            "status.conditions[0].lastTransitionTime: Required value",
        ),
        (
            "ClusterVersion condition without status",
            condition_with("/status", Value::Null),
            "status.conditions[0].status: Required value",
        ),
        (
            "ClusterVersion condition without type",
            condition_with("/type", Value::Null),
            "status.conditions[0].type: Required value",
        ),
    ]
}

/// Every ClusterVersion the kit writes passes: a release installed, an upgrade in flight
/// (history[0] Partial with `completionTime: null`), its completion, another installed.
pub(crate) async fn accepted(cp: &ControlPlane) {
    let client = cp.client();
    cp.start_upgrade("4.21.12")
        .await
        .expect("upgrade in flight");
    let cv = clusterversion::api(&client)
        .get("version")
        .await
        .expect("ClusterVersion");
    let history = cv.data["status"]["history"].as_array().expect("history");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        (&history[0]["state"], &history[0]["completionTime"]),
        (&json!("Partial"), &Value::Null)
    );
    assert_eq!(
        (&history[1]["state"], &history[1]["version"]),
        (
            &json!("Completed"),
            &json!(testkit::controlplane::DEFAULT_RELEASE)
        )
    );
    assert_eq!(cv.data["status"]["desired"]["version"], "4.21.12");
    let progressing = cv.data["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "Progressing")
        .expect("Progressing");
    assert_eq!(progressing["status"], "True");
    assert!(
        cp.start_upgrade("4.22.5").await.is_err(),
        "one upgrade at a time"
    );

    cp.finish_upgrade().await.expect("upgrade completed");
    let cv = clusterversion::api(&client)
        .get("version")
        .await
        .expect("ClusterVersion");
    assert_eq!(cv.data["status"]["history"][0]["state"], "Completed");
    assert!(cv.data["status"]["history"][0]["completionTime"].is_string());
    assert!(cp.finish_upgrade().await.is_err(), "nothing in flight");
    cp.set_release("4.23.2").await.expect("another release");
}
