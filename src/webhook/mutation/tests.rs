use super::*;
use crate::core::model::GROUP;
use serde_json::{Value, json};

fn request(operation: &str, object: Value) -> Request {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7c5e3b1e-0000-4000-8000-000000000001",
            "kind": {"group": GROUP, "version": "v1", "kind": "MachineOSConfig"},
            "resource": {"group": GROUP, "version": "v1", "resource": "machineosconfigs"},
            "name": "worker",
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": null
        }
    });
    admission::decode(&serde_json::to_vec(&body).expect("json")).expect("decodes")
}

fn mosc(metadata: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig", "metadata": metadata,
           "spec": {"machineConfigPool": {"name": "worker"}}})
}

/// The object after the response's patch, as the API server would apply it.
fn patched(object: &Value, resp: &AdmissionResponse) -> Value {
    let mut out = object.clone();
    if let Some(bytes) = &resp.patch {
        let review = serde_json::to_value(answer::into_review(resp.clone())).expect("json");
        assert_eq!(review["response"]["patchType"], "JSONPatch");
        let patch: json_patch::Patch = serde_json::from_slice(bytes).expect("patch");
        json_patch::patch(&mut out, &patch).expect("applies");
    }
    out
}

#[test]
fn create_gets_exactly_the_finalizer_and_reinvocation_changes_nothing() {
    let object = mosc(json!({"name": "worker", "labels": {"a": "b"}}));
    let (outcome, resp) = review(&request("CREATE", object.clone()), true);
    assert_eq!(outcome, Mutation::Added);
    let once = patched(&object, &resp);
    let mut expected = object.clone();
    expected["metadata"]["finalizers"] = json!([finalizer::FINALIZER]);
    assert_eq!(once, expected);

    let (outcome, resp) = review(&request("UPDATE", once.clone()), true);
    assert_eq!(outcome, Mutation::Present);
    assert_eq!(patched(&once, &resp), once);
}

#[test]
fn other_finalizers_are_kept() {
    let object = mosc(json!({"name": "worker", "finalizers": ["example.com/x"]}));
    let (_, resp) = review(&request("UPDATE", object.clone()), true);
    assert_eq!(
        patched(&object, &resp)["metadata"]["finalizers"],
        json!(["example.com/x", finalizer::FINALIZER])
    );
}

#[test]
fn terminating_disabled_and_unrelated_requests_are_left_alone() {
    let terminating = mosc(json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z"}));
    let (outcome, resp) = review(&request("UPDATE", terminating.clone()), true);
    assert_eq!(outcome, Mutation::Terminating);
    assert_eq!(patched(&terminating, &resp), terminating);

    let bare = mosc(json!({"name": "worker"}));
    let (outcome, resp) = review(&request("CREATE", bare.clone()), false);
    assert_eq!(outcome, Mutation::Disabled);
    assert_eq!(patched(&bare, &resp), bare);

    let (outcome, _) = review(&request("DELETE", bare), true);
    assert_eq!(outcome, Mutation::Ignored);
}
