//! `recover --from-dir`: the plan from a must-gather, as text and JSON, each exit status, and bad
//! input (a broken file is exit 2 and nothing else).

use std::fs;
use std::path::Path;

use serde_json::json;

use super::*;

/// A copy of the fixture to edit.
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture(), dir.path());
    dir
}

pub(super) fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The copy's `cluster-scoped-resources/<rel>`.
fn resources(dir: &Path, rel: &str) -> std::path::PathBuf {
    let gather = fs::read_dir(dir)
        .expect("read copy")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("the must-gather's image directory");
    gather.join("cluster-scoped-resources").join(rel)
}

#[test]
fn the_plan_names_the_stuck_node_with_its_patch_as_text() {
    let run = recover_dir(&fixture(), &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let out = &run.stdout;
    assert!(
        out.contains(&format!("RECOVERABLE node {STUCK} (pool worker)")),
        "{out}"
    );
    for part in [
        "no MachineOSBuild carries that image",
        "desiredDrain = lastAppliedDrain = drain-rendered-worker-5f2e9a1c7b3d8e4f0a6c2b9d1e7f3a5c, node cordoned",
        "no MachineOSConfig targets pool worker",
        &format!("oc patch node {STUCK} --type=json -p '[{{\"op\":\"test\""),
        "Nothing was written: run again with --apply",
    ] {
        assert!(out.contains(part), "{part:?} in:\n{out}");
    }
    let listed: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" node ip-") && !l.starts_with(' '))
        .collect();
    assert_eq!(listed.len(), 1, "only the stuck node is listed:\n{out}");
}

#[test]
fn the_json_plan_has_the_documented_schema() {
    let run = recover_dir(&fixture(), &["-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["pool"], json!(null));
    for key in ["cancelled", "needsAttention", "outOfScope"] {
        assert_eq!(report[key], json!([]), "{key}: {report:#}");
    }
    // Without --authfile the registry is not asked, and the report says so.
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report:#}");
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w
                .contains("the registry was not asked whether the stuck nodes' images are gone")),
        "{report:#}"
    );
    assert_eq!(nodes_in(&report, "recoverable"), [STUCK]);
    let r = &report["recoverable"][0];
    assert_eq!(r["pool"], "worker");
    assert_eq!(r["image"], LOST_IMAGE);
    assert_eq!(
        r["registry"],
        json!({"status": null,
            "why": "planned from a dump without --authfile (a dump holds no credentials)"})
    );
    assert_eq!(r["bootID"], "7a7be697-054b-57ef-9d68-f80d9adc036c");
    assert_eq!(
        r["recorded"]["machineconfiguration.openshift.io/desiredImage"],
        LOST_IMAGE
    );
    assert!(r["why"].as_array().is_some_and(|w| w.len() == 7), "{r:#}");
    assert!(
        r["why"][2]
            .as_str()
            .is_some_and(|w| w.starts_with("the loss was not verified by the registry")),
        "{r:#}"
    );
    let patch = r["patch"].as_array().expect("patch");
    assert_eq!(patch[0]["op"], "test");
    assert_eq!(
        patch[0]["path"],
        "/metadata/annotations/machineconfiguration.openshift.io~1state"
    );
    assert_eq!(patch[0]["value"], "Degraded");
    // No currentImage on this node: desiredImage is removed, never set to "".
    assert!(
        patch.contains(&json!({"op": "remove", "path": "/metadata/annotations/machineconfiguration.openshift.io~1desiredImage"})),
        "{patch:#?}"
    );
    assert!(
        patch.contains(&json!({"op": "replace", "path": "/metadata/annotations/machineconfiguration.openshift.io~1desiredConfig", "value": "rendered-worker-0c8b7d5e3f1a9c2b4d6e8f0a1b3c5d7e"})),
        "{patch:#?}"
    );
    let last = patch.last().expect("ops");
    assert_eq!(
        last["path"],
        "/metadata/annotations/mosc-guard.dev~1recovery"
    );
    let command = r["command"].as_str().expect("command");
    assert!(
        command.starts_with(&format!("oc patch node {STUCK} --type=json -p '")),
        "{command}"
    );
    assert!(
        command.contains(&serde_json::to_string(&r["patch"]).expect("patch JSON")),
        "the command carries the very patch: {command}"
    );
}

#[test]
fn a_pool_filter_plans_that_pool_and_an_unknown_pool_is_an_error() {
    let run = recover_dir(&fixture(), &["worker", "-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.json()["pool"], "worker");
    assert_eq!(nodes_in(&run.json(), "recoverable"), [STUCK]);

    let run = recover_dir(&fixture(), &["master", "-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.json()["recoverable"], json!([]));
    let run = recover_dir(&fixture(), &["master"]);
    assert!(run.stdout.contains("nothing to recover"), "{run:?}");

    let run = recover_dir(&fixture(), &["infra"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(
        run.stderr
            .contains("machineconfigpool \"infra\" not found in ")
            && run.stderr.contains("(pools: master, worker)"),
        "{run:?}"
    );
}

/// The fixture's pool renders this config (its `spec.configuration`).
const POOL_CONFIG: &str = "rendered-worker-5f2e9a1c7b3d8e4f0a6c2b9d1e7f3a5c";
const NEW_IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// Writes a MachineOSConfig `worker` into the copy at `dir` (recreated after the bug), pointing
/// at [`NEW_IMAGE`], and with `build`, a MachineOSBuild of it for the pool's configuration with
/// that condition.
fn recreate_mosc(dir: &Path, build: Option<&str>) {
    let mosc = resources(dir, "machineconfiguration.openshift.io/machineosconfigs");
    fs::create_dir_all(&mosc).expect("mkdir");
    fs::write(
        mosc.join("worker.yaml"),
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSConfig\n\
             metadata: {{name: worker, uid: 1e2d3c4b-0000-4000-8000-000000000001}}\n\
             spec: {{machineConfigPool: {{name: worker}}}}\n\
             status: {{currentImagePullSpec: '{NEW_IMAGE}'}}\n"
        ),
    )
    .expect("write");
    let Some(condition) = build else { return };
    let mosb = resources(dir, "machineconfiguration.openshift.io/machineosbuilds");
    fs::create_dir_all(&mosb).expect("mkdir");
    fs::write(
        mosb.join("worker-new.yaml"),
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSBuild\n\
             metadata: {{name: worker-new, labels: \
             {{machineconfiguration.openshift.io/machine-os-config: worker}}}}\n\
             spec: {{machineOSConfig: {{name: worker}}, machineConfig: {{name: {POOL_CONFIG}}}}}\n\
             status: {{digestedImagePushSpec: '{NEW_IMAGE}', \
             conditions: [{{type: {condition}, status: 'True'}}]}}\n"
        ),
    )
    .expect("write");
}

/// A MachineOSConfig recreated after the bug whose build for the pool's configuration has not
/// succeeded (none yet: MCO builds nothing while the pool is NodeDegraded; or one that failed)
/// sends the pool's nodes no image (`canLayeredContinue`): no pause needed, the node is
/// recoverable.
#[test]
fn a_recreated_mosc_whose_build_has_not_succeeded_needs_no_pause() {
    for build in [None, Some("Failed")] {
        let dir = copy();
        recreate_mosc(dir.path(), build);
        let run = recover_dir(dir.path(), &["-o", "json"]);
        assert_eq!(run.code, Some(0), "{build:?}: {run:?}");
        let report = run.json();
        assert_eq!(
            nodes_in(&report, "recoverable"),
            [STUCK],
            "{build:?}: {report:#}"
        );
        let text = recover_dir(dir.path(), &[]);
        assert!(
            text.stdout.contains(
                "MachineOSConfig worker targets pool worker but sends its nodes no image"
            ),
            "{build:?}: {text:?}"
        );
    }
}

/// One whose build for the pool's configuration succeeded with its image would send the node
/// straight back to it once Done: pause first.
#[test]
fn a_recreated_mosc_whose_build_succeeded_needs_a_pause_exit_1() {
    let dir = copy();
    recreate_mosc(dir.path(), Some("Succeeded"));
    let run = recover_dir(dir.path(), &["-o", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["recoverable"], json!([]));
    let attention = &report["needsAttention"][0];
    assert_eq!(attention["node"], STUCK);
    assert_eq!(attention["problems"], json!(["poolTargetedNotPaused"]));
    assert!(
        attention["do"][0].as_str().is_some_and(
            |d| d.contains(r#"oc patch mcp worker --type=merge -p '{"spec":{"paused":true}}'"#)
        ),
        "{attention:#}"
    );

    let text = recover_dir(dir.path(), &[]);
    assert_eq!(text.code, Some(1), "{text:?}");
    assert!(
        text.stdout
            .contains(&format!("NEEDS ATTENTION node {STUCK} (pool worker)")),
        "{text:?}"
    );
}

#[test]
fn a_dump_without_machine_configs_cannot_vouch_for_the_cancel() {
    let dir = copy();
    fs::remove_dir_all(resources(
        dir.path(),
        "machineconfiguration.openshift.io/machineconfigs",
    ))
    .expect("rm");
    let run = recover_dir(dir.path(), &["-o", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(
        run.json()["needsAttention"][0]["problems"],
        json!(["machineConfigsUnknown"])
    );
}

#[test]
fn a_broken_file_is_exit_2_and_nothing_else() {
    for rel in [
        "core/nodes/ip-10-0-11-240.us-east-2.compute.internal.yaml",
        "machineconfiguration.openshift.io/machineconfigs/rendered-worker-0c8b7d5e3f1a9c2b4d6e8f0a1b3c5d7e.yaml",
    ] {
        let dir = copy();
        let file = resources(dir.path(), rel);
        let text = fs::read_to_string(&file).expect("read");
        // Cut short inside a flow mapping: no YAML parser reads that whole.
        let cut = format!("{}\nmetadata: {{name: cut-short\n", &text[..text.len() / 2]);
        fs::write(&file, cut).expect("truncate");
        for extra in [&[][..], &["-o", "json"][..]] {
            let run = recover_dir(dir.path(), extra);
            assert_eq!(run.code, Some(2), "{rel}: {run:?}");
            assert_eq!(run.stdout, "", "{rel}: nothing on stdout: {run:?}");
            assert!(
                run.stderr
                    .contains("is incomplete, so no plan can say a cancel is safe"),
                "{rel}: {run:?}"
            );
            let name = Path::new(rel).file_name().expect("name").to_string_lossy();
            assert!(run.stderr.contains(name.as_ref()), "{rel} named: {run:?}");
        }
    }
    // The MachineConfig gap is recovery's alone: `check` does not read MachineConfigs.
    let dir = copy();
    let file = resources(
        dir.path(),
        "machineconfiguration.openshift.io/machineconfigs/00-worker.yaml",
    );
    fs::write(&file, "kind: MachineConfig\nmetadata: [unclosed\n").expect("write");
    let run = mosc_guard(&[
        "check",
        "--all",
        "--from-dir",
        dir.path().to_str().expect("UTF-8"),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
}

#[test]
fn apply_is_refused_on_a_dump_and_a_missing_directory_is_an_error() {
    let run = recover_dir(&fixture(), &["--apply"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("error: --apply writes to the live cluster"),
        "{run:?}"
    );
    let run = recover_dir(Path::new("/nonexistent/must-gather"), &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("cannot read directory"), "{run:?}");
    let run = mosc_guard(&["recover", "--wait"]);
    assert_eq!(run.code, Some(2), "--wait needs --apply: {run:?}");
    let run = mosc_guard(&["recover", "--apply", "--timeout", "soon"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("not a duration"), "{run:?}");
    // A deadline the clock cannot add is refused before anything is read or written.
    let run = mosc_guard(&["recover", "--apply", "--timeout", "9223372036854775807s"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("longer than a week"), "{run:?}");
}

#[test]
fn check_all_lists_the_stuck_node_too() {
    let dir = fixture();
    let dir = dir.to_str().expect("UTF-8");
    let run = mosc_guard(&["check", "--all", "--from-dir", dir]);
    assert_eq!(
        run.code,
        Some(0),
        "no MachineOSConfig left to refuse: {run:?}"
    );
    assert!(
        run.stdout
            .contains("1 node(s) stuck on a lost image (Degraded; no MachineOSBuild carries"),
        "{run:?}"
    );
    let row = run
        .stdout
        .lines()
        .find(|l| l.starts_with(STUCK))
        .unwrap_or_else(|| panic!("a row for {STUCK}: {run:?}"));
    assert!(
        row.contains("worker") && row.contains("ocb-image@sha256:01971adebd63"),
        "{row}"
    );

    let run = mosc_guard(&["check", "--all", "--from-dir", dir, "-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.json(), json!([]), "the JSON array keeps its schema");
    assert!(
        run.stderr.contains(&format!(
            "warning: node {STUCK} (pool worker) is stuck on a lost image"
        )),
        "{run:?}"
    );
}
