//! Deferred deletion's functional core: the finalizer, the JSON patches that add or remove exactly
//! it, and what the controller should do with one MachineOSConfig. The mutating webhook, the
//! controller and `remove-finalizers` apply these plans.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::core::model::OVERRIDE_ANNOTATION;
use crate::core::policy::Verdict;

/// Held on every MachineOSConfig in defer mode; removed once no node still needs its images.
pub const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// Whether the object carries our finalizer.
pub fn has(meta: &ObjectMeta) -> bool {
    position(meta).is_some()
}

/// Whether the API server has accepted a deletion of the object (it waits on finalizers).
pub fn is_terminating(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

fn position(meta: &ObjectMeta) -> Option<usize> {
    meta.finalizers
        .as_ref()?
        .iter()
        .position(|f| f == FINALIZER)
}

/// The JSON patch that appends our finalizer, or `None` when it is there already or the
/// object is being deleted (finalizers cannot be added then, and must not be).
///
/// With `resource_version`, the patch first tests it, so a write based on a stale read fails
/// with a conflict instead of acting on an object that changed meanwhile. The admission
/// webhook patches the object in the request and passes `None`.
pub fn add_patch(meta: &ObjectMeta, resource_version: Option<&str>) -> Option<json_patch::Patch> {
    if has(meta) || is_terminating(meta) {
        return None;
    }
    let add = match &meta.finalizers {
        Some(_) => json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}),
        None => json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}),
    };
    patch(resource_version, vec![add])
}

/// The JSON patch that removes our finalizer and nothing else (the index is tested first, so
/// a concurrent change to the list cannot make it remove another finalizer), or `None` when
/// the object does not carry it. With `override_reason` it also sets the override annotation,
/// so the validating webhook (which decides a finalizer's removal from an object being deleted
/// as its deletion) lets a forced removal through and the reason is on record.
pub fn remove_patch(
    meta: &ObjectMeta,
    resource_version: Option<&str>,
    override_reason: Option<&str>,
) -> Option<json_patch::Patch> {
    let index = position(meta)?;
    let path = format!("/metadata/finalizers/{index}");
    let annotate = override_reason.map(|reason| match &meta.annotations {
        Some(_) => json!({"op": "add", "path": format!("/metadata/annotations/{}", OVERRIDE_ANNOTATION.replace('~', "~0").replace('/', "~1")), "value": reason}),
        None => json!({"op": "add", "path": "/metadata/annotations", "value": {OVERRIDE_ANNOTATION: reason}}),
    });
    let ops = annotate
        .into_iter()
        .chain([
            json!({"op": "test", "path": path, "value": FINALIZER}),
            json!({"op": "remove", "path": path}),
        ])
        .collect();
    patch(resource_version, ops)
}

/// `ops`, preceded by a resourceVersion test when given. `None` only if the operations do not
/// form a JSON patch, a bug in this module that its tests catch; callers then write nothing
/// rather than something else.
fn patch(resource_version: Option<&str>, ops: Vec<Value>) -> Option<json_patch::Patch> {
    let guard = resource_version
        .map(|rv| json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    let ops: Vec<Value> = guard.into_iter().chain(ops).collect();
    serde_json::from_value(Value::Array(ops))
        .inspect_err(|e| tracing::error!(error = %e, "building a JSON patch"))
        .ok()
}

/// What the finalizer controller does with one MachineOSConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not being deleted and not protected yet: add the finalizer.
    Protect,
    /// Nothing to do (protected and live, or not ours to hold).
    Idle,
    /// Being deleted and safe now (or overridden): remove the finalizer.
    Remove(RemovalReason),
    /// Being deleted while nodes still need its images: keep holding.
    Wait { blocking_nodes: Vec<String> },
}

/// Why a held deletion was let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovalReason {
    /// The rollout settled: no node still needs an image of it.
    Settled,
    /// The override annotation was set.
    Overridden,
}

impl RemovalReason {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            RemovalReason::Settled => "settled",
            RemovalReason::Overridden => "overridden",
        }
    }
}

/// What kind of failure a finalizer patch met: the controller decides its retry from it, and
/// counts it under [`Failure::label`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// A write based on a stale read (409, or a failed resourceVersion test): expected now and
    /// then, retried at once.
    Conflict,
    /// 422 on an object that did not change: the API server (a CRD rule, an admission
    /// policy, another webhook) rejects the update itself; retrying at once cannot help.
    Invalid,
    /// 401/403: RBAC.
    Forbidden,
    /// No answer within the patch deadline.
    Timeout,
    /// Anything else (other status codes, connection errors).
    Other,
}

impl Failure {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Failure::Conflict => "conflict",
            Failure::Invalid => "invalid",
            Failure::Forbidden => "forbidden",
            Failure::Timeout => "timeout",
            Failure::Other => "other",
        }
    }
}

/// Plans the controller's step. `verdict` is the confirmed policy verdict for deleting it,
/// needed only when it is terminating and carries the finalizer (`None` otherwise, or when
/// the guard could not verify, which means waiting).
pub fn plan(meta: &ObjectMeta, verdict: Option<&Verdict>, add_finalizers: bool) -> Step {
    match (is_terminating(meta), has(meta)) {
        (false, false) if add_finalizers => Step::Protect,
        (false, _) | (true, false) => Step::Idle,
        (true, true) => match verdict {
            Some(v) if v.allowed && v.overridden() => Step::Remove(RemovalReason::Overridden),
            Some(v) if v.allowed => Step::Remove(RemovalReason::Settled),
            _ => Step::Wait {
                blocking_nodes: verdict.map(waiting_for).unwrap_or_default(),
            },
        },
    }
}

/// What a held deletion waits for: the blocking nodes, then `pool/<name>` for each pool still
/// rolling out one of its images.
fn waiting_for(v: &Verdict) -> Vec<String> {
    v.blocking
        .iter()
        .map(|b| b.node.clone())
        .chain(v.rolling.iter().map(|p| format!("pool/{}", p.pool)))
        .collect()
}

/// What `remove-finalizers` (uninstall) does with one MachineOSConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uninstall {
    /// It does not carry our finalizer.
    Skip,
    /// Remove the finalizer: the object is live (the finalizer protects nothing yet), its
    /// deletion is safe now, or `--force`.
    Remove,
    /// Its deletion is deferred and nodes still need its images: removing the finalizer now
    /// would let MCO delete an image a node is rolling to.
    Keep { blocking_nodes: Vec<String> },
}

/// Plans `remove-finalizers` for one object; `verdict` is the live policy verdict for deleting
/// it (needed only when it is terminating).
pub fn uninstall(meta: &ObjectMeta, verdict: Option<&Verdict>, force: bool) -> Uninstall {
    if !has(meta) {
        return Uninstall::Skip;
    }
    if !is_terminating(meta) || force {
        return Uninstall::Remove;
    }
    match verdict {
        Some(v) if v.allowed => Uninstall::Remove,
        _ => Uninstall::Keep {
            blocking_nodes: verdict.map(waiting_for).unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests;
