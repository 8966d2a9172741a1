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
    let status_without = |field: &str| {
        required(
            format!("ClusterVersion status without {field}"),
            Op::PatchStatus(version(), json!({ field: null })),
            &format!("status.{field}"),
        )
    };
    let mut cases = vec![
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
        status_without("availableUpdates"),
        status_without("desired"),
    ];
    for field in ["image", "version"] {
        cases.push(required(
            format!("ClusterVersion desired without {field}"),
            Op::PatchStatus(version(), json!({"desired": { field: null }})),
            &format!("status.desired.{field}"),
        ));
    }
    cases.extend(["observedGeneration", "versionHash"].map(status_without));
    for field in [
        "completionTime",
        "image",
        "startedTime",
        "state",
        "verified",
    ] {
        cases.push(required(
            format!("ClusterVersion history entry without {field}"),
            history_with(&format!("/{field}"), Value::Null),
            &format!("status.history[0].{field}"),
        ));
    }
    cases.push((
        "ClusterVersion history state other than Completed or Partial",
        history_with("/state", json!("Failed")),
        "supported values: \"Completed\", \"Partial\"",
    ));
    for field in ["lastTransitionTime", "status", "type"] {
        cases.push(required(
            format!("ClusterVersion condition without {field}"),
            condition_with(&format!("/{field}"), Value::Null),
            &format!("status.conditions[0].{field}"),
        ));
    }
    cases
}

/// The case `name`: `op` leaves the required field at `path` unset, refused with
/// "`path`: Required value". (Cases live for the whole test binary, so their text is leaked.)
fn required(name: String, op: Op, path: &str) -> Case {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    (leak(name), op, leak(format!("{path}: Required value")))
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
