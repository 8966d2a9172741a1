use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn meta(finalizers: Option<&[&str]>, terminating: bool) -> ObjectMeta {
    ObjectMeta {
        name: Some("worker".into()),
        finalizers: finalizers.map(|f| f.iter().map(|s| s.to_string()).collect()),
        deletion_timestamp: terminating.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
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
