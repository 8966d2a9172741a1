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
use crate::core::outcome::Mutation;
use crate::core::policy::TargetKind;
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
        && admission::guarded_kind(req) == Some(TargetKind::MachineOSConfig);
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
mod tests;
