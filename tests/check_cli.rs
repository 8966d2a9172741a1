//! `mosc-guard check --from-dir` end to end: the real binary over the fixture trees in
//! tests/fixtures (see tests/fixtures/README.md for what each tree holds).
//!
//! Contract: exit 0 when deletion is safe, 1 when it would be blocked, 2 on error (reason
//! on stderr); skipped files are one warning line each on stderr; `--output json` prints
//! one report object on stdout for both outcomes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63c4e0f2a7b5d8193e6f4a2c0b7d9e8f1a3c5b7d9e0f2a4c6b8d0e";
const SHORT_IMAGE: &str = ".../ocb-image@sha256:01971adebd63...";
const MOSB: &str = "worker-a7c04d3f9e1b62858d0f4c7e1b93a6d2";
const ROLLING_NODE: &str = "ip-10-0-11-240.us-east-2.compute.internal";
const WORKERS: [&str; 3] = [
    "ip-10-0-11-240.us-east-2.compute.internal",
    "ip-10-0-34-18.us-east-2.compute.internal",
    "ip-10-0-77-103.us-east-2.compute.internal",
];
const DENIAL_HEAD: &str =
    "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.";
/// The noise files in must-gather-rolling that must each produce one warning.
const NOISE: [&str; 2] = [
    "gather-debug/api-resources.json",
    "namespaces/openshift-machine-config-operator/core/configmaps.yaml",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{}", self.stdout))
    }

    /// Non-empty stderr lines.
    fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn mosc_guard(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_mosc-guard"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env_remove("MOSC_GUARD_LOG_FORMAT")
        .output()
        .expect("the mosc-guard binary runs");
    Run {
        code: out
            .status
            .code()
            .expect("mosc-guard exits with a status, not a signal"),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// `mosc-guard check TARGET --from-dir DIR EXTRA...`
fn check_dir(dir: &Path, target: &str, extra: &[&str]) -> Run {
    let dir = dir.to_str().expect("fixture path is UTF-8");
    let mut args = vec!["check", target, "--from-dir", dir];
    args.extend_from_slice(extra);
    mosc_guard(&args)
}

fn check(tree: &str, target: &str, extra: &[&str]) -> Run {
    check_dir(&fixture(tree), target, extra)
}

fn blocking_names(report: &Value) -> Vec<&str> {
    report["blockingNodes"]
        .as_array()
        .expect("blockingNodes is an array")
        .iter()
        .map(|b| b["node"].as_str().expect("node is a string"))
        .collect()
}

/// The one blocking node of the report's scenario.
fn rolling_blocker(machine_os_build: Value) -> Value {
    json!({
        "node": ROLLING_NODE,
        "pool": "worker",
        "currentImage": null,
        "desiredImage": IMAGE,
        "state": "Working",
        "image": IMAGE,
        "machineOSBuild": machine_os_build,
    })
}

#[test]
fn rolling_pool_blocks_with_the_denial_message() {
    let run = check("must-gather-rolling", "machineosconfig/worker", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.starts_with(DENIAL_HEAD), "{run:?}");
    assert!(run.stdout.contains(ROLLING_NODE), "{run:?}");
    assert!(run.stdout.contains(SHORT_IMAGE), "{run:?}");
    assert!(
        run.stdout.contains("mosc-guard.dev/allow-deletion"),
        "{run:?}"
    );
    for settled in &WORKERS[1..] {
        // Not a blocking node, but named as one MCO updates next.
        assert!(
            !run.stdout.contains(&format!("  {settled} (pool")),
            "{settled} is not rolling: {run:?}"
        );
    }
    assert!(
        run.stdout.contains(&format!(
            "3 nodes do not run it yet: {}; MCO updates them one after another",
            WORKERS.join(", ")
        )),
        "{run:?}"
    );
}

#[test]
fn rolling_pool_blocks_in_json() {
    let run = check(
        "must-gather-rolling",
        "machineosconfig/worker",
        &["--output", "json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let mut out = run.json();
    // Skipped noise files are reported in the JSON too, exactly as on stderr.
    let warnings = out["warnings"].take();
    let on_stderr: Vec<String> = run
        .stderr_lines()
        .iter()
        .map(|l| l.trim_start_matches("warning: ").to_string())
        .collect();
    assert_eq!(warnings, json!(on_stderr), "{run:?}");
    assert_eq!(
        warnings.as_array().map(Vec::len),
        Some(NOISE.len()),
        "{run:?}"
    );
    assert_eq!(
        out,
        json!({
            "target": {"kind": "MachineOSConfig", "name": "worker"},
            "allowed": false,
            "policy": "in-flight",
            "overridden": false,
            "images": [{"image": IMAGE, "machineOSBuild": MOSB}],
            "blockingNodes": [rolling_blocker(json!(MOSB))],
            // None of the three workers runs the image yet; the must-gather's pool reports
            // Updating, 0 of 3 machines updated.
            "rollingPools": [{"pool": "worker", "image": IMAGE, "pendingNodes": 3, "nextNodes": WORKERS,
                              "updatedMachines": 0, "machines": 3}],
            "warnings": null,
        }),
        "{run:?}"
    );
}

#[test]
fn target_spellings_are_equivalent() {
    let canonical = check("must-gather-rolling", "machineosconfig/worker", &[]);
    assert_eq!(canonical.code, 1, "{canonical:?}");
    for target in ["worker", "mosc/worker", "machineosconfigs/worker"] {
        let run = check("must-gather-rolling", target, &[]);
        assert_eq!(run.code, 1, "{target}: {run:?}");
        assert_eq!(run.stdout, canonical.stdout, "{target}");
    }
    let json = check("must-gather-rolling", "mosc/worker", &["-o", "json"]).json();
    assert_eq!(
        json["target"],
        json!({"kind": "MachineOSConfig", "name": "worker"})
    );
}

#[test]
fn settled_pool_may_leave_image_mode() {
    let run = check("settled-lists", "worker", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("can be deleted"), "{run:?}");
    assert!(!run.stdout.contains("cannot"), "{run:?}");
    assert_eq!(
        run.stderr_lines(),
        Vec::<&str>::new(),
        "clean lists warn nothing"
    );

    let report = check("settled-lists", "worker", &["--output", "json"]).json();
    assert_eq!(report["allowed"], json!(true));
    assert_eq!(report["overridden"], json!(false));
    assert_eq!(report["policy"], json!("in-flight"));
    assert_eq!(report["blockingNodes"], json!([]));
    assert_eq!(
        report["images"],
        json!([{"image": IMAGE, "machineOSBuild": MOSB}]),
        "read from the MachineOSConfigList and the List of builds"
    );
}

#[test]
fn settled_pool_is_blocked_by_policy_in_use() {
    let run = check("settled-lists", "worker", &["--policy", "in-use"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .starts_with("machineosconfig \"worker\" cannot be deleted yet: 3 nodes"),
        "{run:?}"
    );

    let run = check(
        "settled-lists",
        "worker",
        &["--policy", "in-use", "--output", "json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["allowed"], json!(false));
    assert_eq!(report["policy"], json!("in-use"));
    assert_eq!(blocking_names(&report), WORKERS, "workers only, by name");
    for b in report["blockingNodes"].as_array().expect("array") {
        assert_eq!(b["currentImage"], json!(IMAGE), "{b}");
        assert_eq!(b["desiredImage"], json!(IMAGE), "{b}");
        assert_eq!(b["state"], json!("Done"), "{b}");
        assert_eq!(b["pool"], json!("worker"), "{b}");
        assert_eq!(b["machineOSBuild"], json!(MOSB), "{b}");
    }
}

#[test]
fn deleting_the_build_being_rolled_is_blocked() {
    for target in [format!("machineosbuild/{MOSB}"), format!("mosb/{MOSB}")] {
        let run = check("must-gather-rolling", &target, &[]);
        assert_eq!(run.code, 1, "{target}: {run:?}");
        assert!(
            run.stdout.starts_with(&format!(
                "machineosbuild \"{MOSB}\" cannot be deleted yet: 1 node still needs its image."
            )),
            "{run:?}"
        );
        assert!(run.stdout.contains(ROLLING_NODE), "{run:?}");
    }

    let run = check(
        "must-gather-rolling",
        &format!("mosb/{MOSB}"),
        &["-o", "json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(
        report["target"],
        json!({"kind": "MachineOSBuild", "name": MOSB})
    );
    assert_eq!(report["allowed"], json!(false));
    assert_eq!(
        report["blockingNodes"],
        json!([rolling_blocker(json!(MOSB))])
    );
}

#[test]
fn missing_targets_are_errors() {
    for target in ["mosb/worker-0000000000", "machineosconfig/infra", "infra"] {
        let run = check("must-gather-rolling", target, &[]);
        assert_eq!(run.code, 2, "{target}: {run:?}");
        let name = target.rsplit('/').next().unwrap_or(target);
        assert!(run.stderr.contains(name), "{target}: {run:?}");
        assert!(run.stderr.contains("not found"), "{target}: {run:?}");
        assert_eq!(run.stdout, "", "no verdict for a missing target");
    }
}

#[test]
fn builds_gone_leave_nothing_to_guard() {
    // The config points at a newer image than the one the node is rolling to, and every build
    // was deleted by hand. MCO deletes images only through builds, so deleting the config now
    // removes nothing from the registry: the rolling node keeps its image.
    let run = check("mosb-gone", "worker", &["--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["images"], json!([]), "{run:?}");
    assert_eq!(report["blockingNodes"], json!([]), "{run:?}");
}

#[test]
fn override_annotation_allows_with_warnings() {
    let run = check("overridden", "worker", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("can be deleted"), "{run:?}");
    assert!(
        run.stdout.contains("replacing node ip-10-0-11-240"),
        "the override reason is shown: {run:?}"
    );

    let run = check("overridden", "worker", &["--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["allowed"], json!(true));
    assert_eq!(report["overridden"], json!(true));
    assert_eq!(
        report["blockingNodes"],
        json!([rolling_blocker(json!(MOSB))]),
        "the override does not hide who is at risk"
    );
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .expect("warnings is an array")
        .iter()
        .map(|w| w.as_str().expect("warnings are strings"))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("replacing node ip-10-0-11-240")),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains(ROLLING_NODE)),
        "{warnings:#?}"
    );
}

#[test]
fn noise_files_warn_on_stderr_without_changing_the_verdict() {
    let noisy = check("must-gather-rolling", "worker", &["--output", "json"]);
    assert_eq!(noisy.code, 1, "{noisy:?}");
    let lines = noisy.stderr_lines();
    assert_eq!(
        lines.len(),
        NOISE.len(),
        "one line per skipped file: {noisy:?}"
    );
    for (line, file) in lines.iter().zip(NOISE) {
        assert!(line.contains(file), "{file} named in {line:?}");
    }
    for quiet in [
        "timestamp",
        "event-filter.html",
        "machine-config-daemon-4xk8z",
    ] {
        assert!(!noisy.stderr.contains(quiet), "{quiet}: {noisy:?}");
    }

    // The same tree without the noise gives the same verdict, silently.
    let clean = tempfile::tempdir().expect("temp dir");
    copy_tree(&fixture("must-gather-rolling"), clean.path(), &|p| {
        !NOISE.iter().any(|n| p.ends_with(n))
    });
    let quiet = check_dir(clean.path(), "worker", &["--output", "json"]);
    assert_eq!(quiet.code, noisy.code, "{quiet:?}");
    assert_eq!(quiet.stderr_lines(), Vec::<&str>::new(), "{quiet:?}");
    let (mut quiet_json, mut noisy_json) = (quiet.json(), noisy.json());
    assert_eq!(quiet_json["warnings"].take(), json!([]));
    assert_eq!(
        noisy_json["warnings"].take().as_array().map(Vec::len),
        Some(NOISE.len())
    );
    assert_eq!(quiet_json, noisy_json);
}

fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) {
    for entry in fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("fixture dir entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().expect("file type").is_dir() {
            fs::create_dir_all(&dst).expect("mkdir");
            copy_tree(&src, &dst, keep);
        } else if keep(&src) {
            fs::copy(&src, &dst).expect("copy fixture file");
        }
    }
}

#[test]
fn missing_directory_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-must-gather");
    let run = check_dir(&missing, "worker", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no-such-must-gather"), "{run:?}");
    assert!(
        run.stderr.contains("No such file or directory"),
        "OS reason: {run:?}"
    );
    assert_eq!(run.stdout, "", "{run:?}");
}

#[test]
fn bad_arguments_are_errors() {
    let run = check("settled-lists", "worker", &["--policy", "sometimes"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("sometimes"), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");

    let run = check("settled-lists", "pod/x", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("pod"), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");

    let run = check("settled-lists", "worker", &["--output", "yaml"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn an_unreachable_api_server_or_a_bad_kubeconfig_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Port 1 on loopback: nothing listens, so the connection is refused at once.
    let unreachable = dir.path().join("unreachable.kubeconfig");
    fs::write(
        &unreachable,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: c, context: {cluster: k, user: u}}]\n",
    )
    .expect("write kubeconfig");
    let garbage = dir.path().join("garbage.kubeconfig");
    fs::write(&garbage, "{ not: [yaml").expect("write kubeconfig");
    for (path, want) in [
        (&unreachable, "error: listing"),
        (&garbage, "error: loading kubeconfig"),
    ] {
        let path = path.to_str().expect("UTF-8 path");
        let run = mosc_guard(&["check", "worker", "--kubeconfig", path]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.starts_with(want), "{run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
    }
}

/// The state the one degraded trial of the race soak hit (RELIABILITY.md, section 1): MCO has
/// pointed the MachineOSConfig at a newly built image that no node runs or was sent to yet, and
/// the pool still reports `Updated` from the previous rollout (its next status pass turns it
/// `Updating`). Deleting the MachineOSConfig now lets MCO's node controller, still holding it in
/// its cache, send nodes to the image the cleanup deletes: blocked, whatever the pool reports.
#[test]
fn a_config_pointing_at_an_image_no_node_has_yet_is_not_deletable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = |c: char| format!("registry.example/ocb@sha256:{}", c.to_string().repeat(64));
    let (old, new) = (image('a'), image('b'));
    let node = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/desiredImage": old,
                "machineconfiguration.openshift.io/currentImage": old,
                "machineconfiguration.openshift.io/state": "Done"}}})
    };
    let build = |name: &str, image: &str| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
            "spec": {"machineOSConfig": {"name": "worker"}},
            "status": {"digestedImagePushSpec": image}})
    };
    let pool = |paused: bool| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
         "metadata": {"name": "worker"},
         "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}, "paused": paused},
         "status": {"machineCount": 2, "updatedMachineCount": 2, "conditions": [
             {"type": "Updated", "status": "True"}, {"type": "Updating", "status": "False"}]}})
    };
    let write = |paused: bool| {
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            pool(paused),
            {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
             "metadata": {"name": "worker",
                          "annotations": {"machineconfiguration.openshift.io/current-machine-os-build": "worker-new"}},
             "spec": {"machineConfigPool": {"name": "worker"},
                      "renderedImagePushSpec": "registry.example/ocb:latest"},
             "status": {"currentImagePullSpec": new}},
            build("worker-old", &old),
            build("worker-new", &new),
            node("node-0"),
            node("node-1"),
        ]});
        fs::write(dir.path().join("dump.json"), objects.to_string()).expect("write dump");
    };

    write(false);
    let run = check_dir(dir.path(), "machineosconfig/worker", &["--output", "json"]);
    assert_eq!(run.code, 1, "the pool is about to roll out {new}: {run:?}");
    let report = run.json();
    assert_eq!(report["rollingPools"][0]["pool"], "worker", "{run:?}");
    assert_eq!(report["rollingPools"][0]["pendingNodes"], 2, "{run:?}");
    assert_eq!(report["rollingPools"][0]["updatedMachines"], 2, "{run:?}");
    let run = check_dir(dir.path(), "machineosconfig/worker", &[]);
    assert!(
        run.stdout.contains(
            "(pool status: 2 of 2 machines updated): 2 nodes do not run it yet: node-0, node-1"
        ),
        "{run:?}"
    );
    assert!(run.stdout.contains("oc patch mcp worker"), "{run:?}");

    // Paused, MCO sends no node to it: the deletion is safe, as the denial says.
    write(true);
    let run = check_dir(dir.path(), "machineosconfig/worker", &[]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// A dump with one object of each kind the policy reads, as a must-gather lays it out.
fn small_dump(dir: &Path) {
    let at = |rel: &str, text: &str| {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    };
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigpools/worker.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n\
         spec:\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n",
    );
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineosconfigs/worker.yaml",
        &format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSConfig\nmetadata:\n  name: worker\n  uid: u-1\n\
             spec:\n  machineConfigPool:\n    name: worker\nstatus:\n  currentImagePullSpec: {IMAGE}\n"
        ),
    );
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineosbuilds/worker-1.yaml",
        &format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSBuild\nmetadata:\n  name: worker-1\n\
             \x20 labels:\n    machineconfiguration.openshift.io/machine-os-config: worker\n\
             \x20   machineconfiguration.openshift.io/target-machine-config-pool: worker\n\
             \x20 ownerReferences:\n  - {{apiVersion: machineconfiguration.openshift.io/v1, kind: MachineOSConfig, name: worker, uid: u-1, controller: true}}\n\
             spec:\n  machineOSConfig:\n    name: worker\nstatus:\n  digestedImagePushSpec: {IMAGE}\n"
        ),
    );
    for (name, current) in [("w-0", IMAGE), ("w-1", IMAGE)] {
        at(
            &format!("cluster-scoped-resources/core/nodes/{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    node-role.kubernetes.io/worker: \"\"\n\
                 \x20 annotations:\n    machineconfiguration.openshift.io/desiredImage: {IMAGE}\n\
                 \x20   machineconfiguration.openshift.io/currentImage: {current}\n"
            ),
        );
    }
}

#[test]
fn a_dump_that_cannot_be_read_whole_is_an_error_unless_allowed() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_dump(dir.path());
    let settled = check_dir(dir.path(), "worker", &[]);
    assert_eq!(settled.code, 0, "{settled:?}");

    // A node cut short: the one node that may still need the image could be in it.
    let node = dir
        .path()
        .join("cluster-scoped-resources/core/nodes/w-1.yaml");
    let text = fs::read_to_string(&node).expect("read");
    let cut = text.find("currentImage").expect("annotation") + "currentIm".len();
    fs::write(&node, &text[..cut]).expect("truncate");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.contains("is incomplete"), "{run:?}");
    assert!(
        run.stderr
            .contains("cluster-scoped-resources/core/nodes/w-1.yaml"),
        "{run:?}"
    );
    assert!(run.stderr.contains("--allow-incomplete"), "{run:?}");

    // --allow-incomplete decides on the rest and lists what it could not read.
    let run = check_dir(dir.path(), "worker", &["--allow-incomplete", "-o", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let warnings = run.json()["warnings"].clone();
    assert!(
        warnings.as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("nodes/w-1.yaml")))),
        "{run:?}"
    );

    // Nodes but no pools: membership, and so the pool rule, cannot be decided.
    small_dump(dir.path());
    fs::remove_file(dir.path().join(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigpools/worker.yaml",
    ))
    .expect("remove pool");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("2 Nodes but no MachineConfigPools"),
        "{run:?}"
    );
}

#[test]
fn disagreeing_copies_give_the_most_cautious_verdict() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_dump(dir.path());
    // A second copy of w-1, from `oc get -o yaml` without a resourceVersion: still updating.
    let node = fs::read_to_string(
        dir.path()
            .join("cluster-scoped-resources/core/nodes/w-1.yaml"),
    )
    .expect("read");
    let updating = node.replace(
        &format!("currentImage: {IMAGE}"),
        "currentImage: registry.example/old@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    );
    fs::write(dir.path().join("extra-w-1.yaml"), updating).expect("write");
    let run = check_dir(dir.path(), "worker", &["-o", "json"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(blocking_names(&run.json()), ["w-1"], "{run:?}");
    assert!(
        run.stderr
            .contains("the verdict is the most cautious of 2 combinations"),
        "{run:?}"
    );
}
