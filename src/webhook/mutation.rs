//! The mutating webhook of defer mode (`POST /mutate`): every MachineOSConfig created or
//! updated gets the finalizer, so a later deletion waits for the rollout instead of being
//! refused. It never changes anything else and never blocks: the configuration uses
//! failurePolicy Ignore, and the finalizer controller adds the finalizer to anything missed.
//! In deny mode it never patches (a finalizer nobody removes would strand the object),
//! whatever webhook configuration points here.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Json, Response};
use kube::core::admission::{AdmissionResponse, Operation};

use crate::access::view::ClusterView;
use crate::core::finalizer;
use crate::core::model::GROUP;
use crate::core::outcome::Mutation;
use crate::webhook::admission::{self, Admission, Request};
use crate::webhook::answer;

/// `POST /mutate`: one AdmissionReview in, one out; a body that is not one gets a 400.
pub async fn mutate<V: ClusterView>(
    State(state): State<Arc<Admission<V>>>,
    body: Bytes,
) -> Response {
    let req = match admission::decode(&body) {
        Ok(req) => req,
        Err(e) => return admission::rejected(e),
    };
    let (outcome, resp) = review(&req, state.adds_finalizers());
    tracing::debug!(uid = %req.uid, name = %req.name, result = ?outcome, "mutation");
    state.engine().metrics.mutation(outcome);
    Json(answer::into_review(resp)).into_response()
}

/// Answers one mutation request; always allows, with a patch when the finalizer is missing.
pub fn review(req: &Request, add_finalizers: bool) -> (Mutation, AdmissionResponse) {
    let allow = || answer::allow(req, Vec::new());
    let relevant = matches!(req.operation, Operation::Create | Operation::Update)
        && req.resource.group == GROUP
        && req.resource.resource == "machineosconfigs"
        && req.sub_resource.as_deref().unwrap_or_default().is_empty();
    let Some(object) = req.object.as_ref().filter(|_| relevant) else {
        return (Mutation::Ignored, allow());
    };
    let meta = &object.metadata;
    if finalizer::has(meta) {
        return (Mutation::Present, allow());
    }
    if finalizer::is_terminating(meta) {
        return (Mutation::Terminating, allow());
    }
    if !add_finalizers {
        return (Mutation::Disabled, allow());
    }
    let Some(patch) = finalizer::add_patch(meta, None) else {
        return (Mutation::Present, allow());
    };
    match allow().with_patch(patch) {
        Ok(resp) => (Mutation::Added, resp),
        Err(e) => {
            tracing::error!(error = %e, name = %req.name, "serializing the finalizer patch");
            (Mutation::Ignored, allow())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let terminating =
            mosc(json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z"}));
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
}
