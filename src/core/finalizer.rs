//! Deferred deletion's functional core: the finalizer, the JSON patches that add or remove
//! exactly it, and what the finalizer controller should do with one MachineOSConfig.
//!
//! Pure: the mutating webhook, the controller and `remove-finalizers` apply these plans;
//! nothing here performs I/O.

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
            Some(v) => Step::Wait {
                blocking_nodes: waiting_for(v),
            },
            None => Step::Wait {
                blocking_nodes: Vec::new(),
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
        Some(v) => Uninstall::Keep {
            blocking_nodes: waiting_for(v),
        },
        None => Uninstall::Keep {
            blocking_nodes: Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(finalizers: Option<&[&str]>, terminating: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("worker".into()),
            finalizers: finalizers.map(|f| f.iter().map(|s| s.to_string()).collect()),
            deletion_timestamp: terminating
                .then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    /// Applies a patch to an object whose metadata is `meta` and returns the finalizers after.
    fn apply(
        meta: &ObjectMeta,
        patch: &json_patch::Patch,
    ) -> Result<Option<Vec<String>>, Box<dyn std::error::Error>> {
        let mut doc = json!({"metadata": meta});
        json_patch::patch(&mut doc, patch)?;
        let after: ObjectMeta = serde_json::from_value(doc["metadata"].clone())?;
        Ok(after.finalizers)
    }

    #[test]
    fn add_creates_the_list_or_appends_and_is_idempotent() {
        let none = meta(None, false);
        let patched = apply(&none, &add_patch(&none, None).expect("patch")).expect("applies");
        assert_eq!(patched, Some(vec![FINALIZER.to_string()]));

        let other = meta(Some(&["example.com/keep"]), false);
        let patched = apply(&other, &add_patch(&other, None).expect("patch")).expect("applies");
        assert_eq!(
            patched,
            Some(vec!["example.com/keep".to_string(), FINALIZER.to_string()])
        );

        let empty = meta(Some(&[]), false);
        let patched = apply(&empty, &add_patch(&empty, None).expect("patch")).expect("applies");
        assert_eq!(patched, Some(vec![FINALIZER.to_string()]));

        assert!(add_patch(&meta(Some(&[FINALIZER]), false), None).is_none());
    }

    #[test]
    fn nothing_is_added_to_an_object_being_deleted() {
        assert!(add_patch(&meta(None, true), None).is_none());
    }

    #[test]
    fn remove_takes_only_ours() {
        let m = meta(Some(&["a", FINALIZER, "b"]), true);
        let patched = apply(&m, &remove_patch(&m, None, None).expect("patch")).expect("applies");
        assert_eq!(patched, Some(vec!["a".to_string(), "b".to_string()]));
        assert!(remove_patch(&meta(Some(&["a"]), true), None, None).is_none());
    }

    #[test]
    fn a_forced_removal_records_the_override() {
        for annotations in [None, Some([("a".to_string(), "b".to_string())].into())] {
            let mut m = meta(Some(&[FINALIZER]), true);
            m.annotations = annotations;
            let patch = remove_patch(&m, None, Some("forced")).expect("patch");
            let mut doc = json!({"metadata": m});
            json_patch::patch(&mut doc, &patch).expect("applies");
            assert_eq!(
                doc["metadata"]["annotations"][OVERRIDE_ANNOTATION],
                "forced"
            );
            assert_eq!(doc["metadata"]["finalizers"], json!([]));
        }
    }

    #[test]
    fn remove_fails_rather_than_removing_another_finalizer() {
        let seen = meta(Some(&["a", FINALIZER]), true);
        let patch = remove_patch(&seen, None, None).expect("patch");
        // Meanwhile someone removed "a": index 1 no longer holds our finalizer.
        let now = meta(Some(&[FINALIZER]), true);
        assert!(apply(&now, &patch).is_err());
    }

    #[test]
    fn resource_version_guard_rejects_a_changed_object() {
        let mut seen = meta(None, false);
        seen.resource_version = Some("41".into());
        let patch = add_patch(&seen, Some("41")).expect("patch");
        assert!(apply(&seen, &patch).is_ok());
        let mut now = seen.clone();
        now.resource_version = Some("42".into());
        assert!(apply(&now, &patch).is_err());
    }

    fn verdict(allowed: bool, override_reason: Option<&str>, blocking: &[&str]) -> Verdict {
        Verdict {
            kind: crate::core::policy::TargetKind::MachineOSConfig,
            name: "worker".into(),
            mode: crate::core::policy::PolicyMode::InFlight,
            allowed,
            override_reason: override_reason.map(str::to_string),
            images: Vec::new(),
            rolling: Vec::new(),
            joining: Vec::new(),
            rules: crate::core::release::Rules::for_version(Some("4.20.0")),
            blocking: blocking
                .iter()
                .map(|n| crate::core::policy::BlockingNode {
                    node: n.to_string(),
                    pool: None,
                    current_image: None,
                    desired_image: None,
                    state: None,
                    image: "registry/repo@sha256:00".into(),
                    machine_os_build: None,
                    reason: crate::core::policy::BlockReason::InFlight,
                })
                .collect(),
        }
    }

    #[test]
    fn plan_covers_every_state() {
        let live_bare = meta(None, false);
        assert_eq!(plan(&live_bare, None, true), Step::Protect);
        assert_eq!(plan(&live_bare, None, false), Step::Idle);
        assert_eq!(
            plan(&meta(Some(&[FINALIZER]), false), None, true),
            Step::Idle
        );
        assert_eq!(plan(&meta(None, true), None, true), Step::Idle);

        let held = meta(Some(&[FINALIZER]), true);
        assert_eq!(
            plan(&held, Some(&verdict(true, None, &[])), true),
            Step::Remove(RemovalReason::Settled)
        );
        assert_eq!(
            plan(
                &held,
                Some(&verdict(true, Some("ticket 7"), &["n1"])),
                false
            ),
            Step::Remove(RemovalReason::Overridden)
        );
        assert_eq!(
            plan(&held, Some(&verdict(false, None, &["n1", "n2"])), true),
            Step::Wait {
                blocking_nodes: vec!["n1".into(), "n2".into()]
            }
        );
        assert_eq!(
            plan(&held, None, true),
            Step::Wait {
                blocking_nodes: Vec::new()
            }
        );
    }

    #[test]
    fn uninstall_keeps_only_deferred_deletions_that_nodes_still_need() {
        assert_eq!(uninstall(&meta(None, false), None, false), Uninstall::Skip);
        assert_eq!(
            uninstall(&meta(Some(&[FINALIZER]), false), None, false),
            Uninstall::Remove
        );
        let held = meta(Some(&[FINALIZER]), true);
        assert_eq!(
            uninstall(&held, Some(&verdict(false, None, &["n1"])), false),
            Uninstall::Keep {
                blocking_nodes: vec!["n1".into()]
            }
        );
        assert_eq!(
            uninstall(&held, Some(&verdict(false, None, &["n1"])), true),
            Uninstall::Remove
        );
        assert_eq!(
            uninstall(&held, Some(&verdict(true, None, &[])), false),
            Uninstall::Remove
        );
    }
}
