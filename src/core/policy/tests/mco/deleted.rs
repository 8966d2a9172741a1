//! What a deletion removes, and "reached", as MCO reads them.

use serde_json::json;

use super::*;

/// "Reached" as MCO reads it: the daemon (`daemon.go`, `currentImage == desiredImage`) and the
/// node controller (`LayeredNodeState.isImageAnnotationEqualToMachineOSConfig`) compare
/// strings; "is this an image being deleted" stays registry identity.
#[test]
fn reached_is_exact_strings_and_deleted_is_registry_identity() {
    let other_spelling = format!("{REPO}:worker-1@sha256:{NEW}");
    let host_case = img(NEW).replacen("image-registry", "Image-Registry", 1);
    let port443 = format!("quay.io:443/ocp/ocb@sha256:{NEW}");
    type Case<'a> = (&'a str, Option<String>, Option<String>, bool, bool);
    let cases: Vec<Case> = vec![
        // (what, desired, current, node rule blocks, pool rule has it pending)
        ("on the image", Some(img(NEW)), Some(img(NEW)), false, false),
        ("mid-update", Some(img(NEW)), Some(img(OLD)), true, true),
        (
            "desired spelled with a tag: the daemon rebases again",
            Some(other_spelling.clone()),
            Some(img(NEW)),
            true,
            false,
        ),
        (
            "current spelled with a tag: re-targeted and pulled again",
            Some(img(NEW)),
            Some(other_spelling.clone()),
            true,
            true,
        ),
        (
            "registry host in another case is the same registry",
            Some(host_case.clone()),
            Some(img(OLD)),
            true,
            true,
        ),
        ("not targeted yet", None, None, false, true),
    ];
    for (what, desired, current, blocks, pending) in cases {
        let nodes = vec![labelled("n", &[W], desired.as_deref(), current.as_deref())];
        let snap = Snapshot {
            machine_os_configs: arcs(&[config("worker", UID, Some(NEW))]),
            machine_os_builds: arcs(&[build("worker", UID, Some(NEW))]),
            pools: arcs(&[selecting("worker", role("worker"))]),
            nodes: arcs(&nodes),
            release: ClusterRelease::given(REL_4_20),
            ..Default::default()
        };
        let mosc = snap.machine_os_config("worker").expect("config");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        assert_eq!(!v.blocking.is_empty(), blocks, "{what}: {v:?}");
        assert_eq!(!v.rolling.is_empty(), pending, "{what}: {v:?}");
    }
    // `:443` is no port: a node heading for that spelling of a guarded image blocks.
    let mut quay = build("worker", UID, None);
    quay["status"] = json!({"digestedImagePushSpec": format!("quay.io/ocp/ocb@sha256:{NEW}")});
    let snap = Snapshot {
        machine_os_configs: arcs(&[config("worker", UID, None)]),
        machine_os_builds: arcs(&[quay]),
        pools: arcs(&[selecting("worker", role("worker"))]),
        nodes: arcs(&[labelled("n", &[W], Some(&port443), None)]),
        release: ClusterRelease::given(REL_4_20),
        ..Default::default()
    };
    let mosc = snap.machine_os_config("worker").expect("config");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert_eq!(blocking_names(&v), ["n"], "{v:?}");
}

/// What a deletion removes: `buildReconciler.deleteMachineOSConfig` (labels, then
/// `metav1.IsControlledBy`), the garbage collector's dependents, `deleteBuilderForMachineOSBuild`
/// (no image without the `machine-os-config` label) and `deleteMOSBImage` (by tag).
#[test]
fn guarded_images_are_what_the_builder_deletes() {
    let mid_update = |hex: &str| labelled("n", &[W], Some(&img(hex)), Some(&img(OLD)));
    let without_label = {
        let mut b = build("worker", UID, Some(NEW));
        b["metadata"]["labels"] = json!({LABEL_TARGET_POOL: "worker"});
        b
    };
    let orphan = {
        let mut b = build("worker", UID, Some(NEW));
        b["metadata"]["ownerReferences"] = json!([]);
        b
    };
    let owned_not_controller = {
        let mut b = build("worker", UID, Some(NEW));
        b["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        b
    };
    let rebuilding = build("worker", UID, None);
    let rebuilding_current = {
        let mut c = config("worker", UID, Some(NEW));
        c["metadata"]["annotations"] = json!({"machineconfiguration.openshift.io/current-machine-os-build": "worker-building"});
        c
    };
    let cases: Vec<(&str, Value, Vec<Value>, bool)> = vec![
        (
            "a build it controls",
            config("worker", UID, Some(NEW)),
            vec![build("worker", UID, Some(NEW))],
            true,
        ),
        (
            "a build an earlier config of the same name controls: 4.20 cleans up by label until \
             PR #6305, and no version string tells which z-stream runs",
            config("worker", UID, Some(NEW)),
            vec![build("worker", OTHER_UID, Some(NEW))],
            true,
        ),
        (
            "an orphan build (no ownerReference) with the config's labels: 4.20 cleans up by label",
            config("worker", UID, Some(NEW)),
            vec![orphan],
            true,
        ),
        (
            "owned but not controller: the garbage collector still deletes it",
            config("worker", UID, Some(NEW)),
            vec![owned_not_controller],
            true,
        ),
        (
            "controlled, without the machine-os-config label: no image is deleted",
            config("worker", UID, Some(NEW)),
            vec![without_label],
            false,
        ),
        (
            "no build left: nothing to delete, whatever the config shows",
            config("worker", UID, Some(NEW)),
            vec![],
            false,
        ),
        (
            "a same-name rebuild still building: its tag points at the config's current image",
            rebuilding_current,
            vec![rebuilding.clone()],
            true,
        ),
        (
            "a first build still running: its tag points at nothing yet",
            config("worker", UID, Some(NEW)),
            vec![rebuilding],
            false,
        ),
    ];
    for (what, config, builds, guarded) in cases {
        let snap = Snapshot {
            machine_os_configs: arcs(&[config]),
            machine_os_builds: arcs(&builds),
            pools: arcs(&[selecting("worker", role("worker"))]),
            nodes: arcs(&[mid_update(NEW)]),
            release: ClusterRelease::given(REL_4_20),
            ..Default::default()
        };
        let mosc = snap.machine_os_config("worker").expect("config");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        assert_eq!(!v.images.is_empty(), guarded, "{what}: {v:?}");
        assert_eq!(!v.allowed, guarded, "{what}: {v:?}");
    }
}

/// A build's own deletion (the MOSB-delete handler) removes its image only with the label.
#[test]
fn a_build_deletion_guards_its_image_only_with_the_label() {
    let mut unlabelled = build("worker", UID, Some(NEW));
    unlabelled["metadata"]["labels"] = json!({});
    for (what, b, guarded) in [
        ("labelled", build("worker", UID, Some(NEW)), true),
        ("unlabelled", unlabelled, false),
    ] {
        let snap = Snapshot {
            machine_os_configs: arcs(&[config("worker", UID, Some(NEW))]),
            machine_os_builds: arcs(&[b]),
            pools: arcs(&[selecting("worker", role("worker"))]),
            nodes: arcs(&[labelled("n", &[W], Some(&img(NEW)), None)]),
            release: ClusterRelease::given(REL_4_20),
            ..Default::default()
        };
        let mosb = &snap.machine_os_builds[0];
        let v = evaluate(&snap, Deletion::MachineOSBuild(mosb), PolicyMode::InFlight);
        assert_eq!(!v.allowed, guarded, "{what}: {v:?}");
    }
}
