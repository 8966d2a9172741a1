//! The validating webhook's tests: what a request is classified as, and how the review answers
//! (the answer's own adjustments are tested in `answer`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::access::view::StaticView;
use crate::core::finalizer;
use crate::core::message::Printable;
use crate::core::model::{GROUP, MACHINE_OS_BUILDER_USER};
use crate::core::policy::{PolicyMode, TargetKind};
use crate::core::release::ClusterRelease;
use crate::core::snapshot::Snapshot;
use crate::decision::Engine;
use crate::telemetry::metrics::Metrics;
use crate::webhook::admission::{
    Admission, Classified, DecodeError, McoUsers, Request, Subject, classify, decode,
};
use crate::webhook::answer::into_review;

fn review(operation: &str, resource: &str, old: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": GROUP, "version": "v1", "kind": "MachineOSConfig"},
            "resource": {"group": GROUP, "version": "v1", "resource": resource},
            "name": "worker",
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": null,
            "oldObject": old,
            "dryRun": false
        }
    }))
    .expect("serializes")
}

fn mosc() -> serde_json::Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig", "metadata": {"name": "worker"}})
}

#[test]
fn delete_of_a_config_is_classified_with_its_object() {
    let req = decode(&review("DELETE", "machineosconfigs", mosc())).expect("decodes");
    match classify(&req) {
        Classified::Delete {
            kind,
            name,
            subject: Ok(Subject::Config(c)),
            finalizer_removal: false,
        } => {
            assert_eq!(
                (kind, name.as_str()),
                (TargetKind::MachineOSConfig, "worker")
            );
            assert_eq!(c.name(), "worker");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn other_operations_and_resources_are_ignored() {
    for (op, res) in [
        ("UPDATE", "machineosconfigs"),
        ("CREATE", "machineosbuilds"),
        ("DELETE", "machineconfigpools"),
    ] {
        let req = decode(&review(op, res, mosc())).expect("decodes");
        assert!(matches!(classify(&req), Classified::Ignore), "{op} {res}");
    }
}

/// An UPDATE review of MOSC `worker` from `old` metadata to `new` metadata.
fn update(old: serde_json::Value, new: serde_json::Value) -> Request {
    let mut body: serde_json::Value =
        serde_json::from_slice(&review("UPDATE", "machineosconfigs", mosc())).expect("json");
    body["request"]["oldObject"]["metadata"] = old;
    body["request"]["object"] = body["request"]["oldObject"].clone();
    body["request"]["object"]["metadata"] = new;
    decode(&serde_json::to_vec(&body).expect("json")).expect("decodes")
}

#[test]
fn removing_our_finalizer_from_a_terminating_config_is_decided_as_its_deletion() {
    let ours = finalizer::FINALIZER;
    let terminating = json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z", "finalizers": [ours, "x"]});
    let removed =
        json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z", "finalizers": ["x"]});
    assert!(matches!(
        classify(&update(terminating.clone(), removed.clone())),
        Classified::Delete {
            kind: TargetKind::MachineOSConfig,
            subject: Ok(Subject::Config(_)),
            finalizer_removal: true,
            ..
        }
    ));
    // Keeping ours, or a live object, or an object that never had it: not our business.
    for (old, new) in [
        (terminating.clone(), terminating.clone()),
        (
            json!({"name": "worker", "finalizers": [ours]}),
            json!({"name": "worker"}),
        ),
        (
            removed.clone(),
            json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z"}),
        ),
    ] {
        assert!(matches!(classify(&update(old, new)), Classified::Ignore));
    }
}

#[test]
fn missing_old_object_is_reported_not_guessed() {
    let req = decode(&review(
        "DELETE",
        "machineosbuilds",
        serde_json::Value::Null,
    ))
    .expect("decodes");
    assert!(matches!(
        classify(&req),
        Classified::Delete {
            subject: Err(_),
            ..
        }
    ));
}

#[test]
fn malformed_bodies_are_errors() {
    assert!(matches!(decode(b"{not json"), Err(DecodeError::Json(_))));
    // The parser quotes an unknown operation; its newline must not reach the log raw.
    let forged = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"DEL\nETE\u001b[31m","userInfo":{}}}"#;
    let e = decode(forged).expect_err("unknown operation").to_string();
    assert!(!e.contains(['\n', '\x1b']), "{e:?}");
    let wrong = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    assert!(matches!(
        decode(&serde_json::to_vec(&wrong).expect("json")),
        Err(DecodeError::WrongKind { .. }) | Err(DecodeError::Json(_))
    ));
    let empty = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    assert!(matches!(
        decode(&serde_json::to_vec(&empty).expect("json")),
        Err(DecodeError::NoRequest)
    ));
}

const IMAGE: &str =
    "quay.io/ocp/ocb@sha256:01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// A build whose image a node is still rolling to.
fn build() -> serde_json::Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": {"name": "worker-1", "uid": "b-1",
            "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
        "status": {"digestedImagePushSpec": IMAGE}})
}

fn admission(users: Option<McoUsers>) -> Admission<StaticView> {
    let snapshot = Snapshot {
        machine_os_builds: vec![Arc::new(serde_json::from_value(build()).expect("build"))],
        nodes: vec![Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": {
                "machineconfiguration.openshift.io/desiredImage": IMAGE}}}))
            .expect("node"),
        )],
        release: ClusterRelease::given("4.20.8"),
        ..Default::default()
    };
    let mut r = Admission::new(Engine::new(
        StaticView(Arc::new(snapshot)),
        PolicyMode::InFlight,
        Arc::new(Metrics::default()),
        Duration::from_secs(1),
    ));
    if let Some(u) = users {
        r.mco_users = u;
    }
    r
}

fn delete_by(user: &str) -> Request {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "machineconfiguration.openshift.io", "version": "v1", "kind": "MachineOSBuild"},
            "resource": {"group": "machineconfiguration.openshift.io", "version": "v1", "resource": "machineosbuilds"},
            "name": "worker-1", "operation": "DELETE", "userInfo": {"username": user},
            "oldObject": build(), "dryRun": false}});
    decode(&serde_json::to_vec(&body).expect("json")).expect("review")
}

#[tokio::test]
async fn mcos_own_deletion_is_admitted_whatever_the_verdict_and_others_are_not() {
    let r = admission(None);
    let mco = r.review(&delete_by(MACHINE_OS_BUILDER_USER)).await;
    assert!(mco.allowed, "{mco:?}");
    assert!(
        mco.result
            .message
            .contains("mosc-guard would have refused it"),
        "the Event's note keeps the refusal: {}",
        mco.result.message
    );
    let admin = r.review(&delete_by("kube:admin")).await;
    assert!(!admin.allowed, "{admin:?}");
    let out = serde_json::to_value(into_review(admin)).expect("json");
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["response"]["uid"], "u-1");
    assert_eq!(out["response"]["status"]["code"], 403);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("worker-1")),
        "{out}"
    );
    let metrics = r.engine().metrics.render(&[], &[], true);
    assert!(
        metrics.contains(
            "mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"mco-would-deny\"} 1"
        ) && metrics.contains(
            "mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"denied\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_mco_users_are_configurable_and_can_be_none() {
    let other = "system:serviceaccount:mco:builder";
    let r = admission(Some(McoUsers::new([other.to_string(), " ".to_string()])));
    assert!(r.review(&delete_by(other)).await.allowed);
    assert!(!r.review(&delete_by(MACHINE_OS_BUILDER_USER)).await.allowed);
    let nobody = admission(Some(McoUsers::new([String::new()])));
    assert!(
        !nobody
            .review(&delete_by(MACHINE_OS_BUILDER_USER))
            .await
            .allowed
    );
    assert!(
        !nobody.review(&delete_by("")).await.allowed,
        "a blank user is nobody's"
    );
}

#[test]
fn control_characters_are_escaped_for_the_log() {
    assert_eq!(Printable("worker").to_string(), "worker");
    assert_eq!(
        Printable("a\nb\x1b[31mc\r\u{7}").to_string(),
        "a\\nb\\u{1b}[31mc\\r\\u{7}"
    );
}
