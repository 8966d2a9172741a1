//! `mosc-guard check --from-dir` end to end: the real binary over the fixture trees in
//! tests/fixtures (see tests/fixtures/README.md for what each tree holds).
//!
//! Contract: exit 0 when deletion is safe, 1 when it would be blocked, 2 on error (reason
//! on stderr); skipped files are one warning line each on stderr; `--output json` prints
//! one report object on stdout for both outcomes.
//!
//! One test binary: the fixtures and the run helpers are here, the tests in [`verdicts`] (safe,
//! blocked, overridden, noisy trees), [`errors`] (bad targets, directories, arguments, API
//! servers), [`dumps`] (a must-gather dump read whole or not, disagreeing copies),
//! [`releases`] (the rules by the dump's ClusterVersion, upgrades in flight) and [`pipeline`]
//! (MCO's own build pipeline: a superseded build, a stopped rollout).

mod dumps;
mod errors;
mod pipeline;
mod releases;
mod verdicts;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use testkit::cli::CliRun;
use testkit::guard::GuardBin;

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

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

fn mosc_guard(args: &[&str]) -> CliRun {
    BIN.cli().args(args).run()
}

/// `mosc-guard check TARGET --from-dir DIR EXTRA...`
fn check_dir(dir: &Path, target: &str, extra: &[&str]) -> CliRun {
    let dir = dir.to_str().expect("fixture path is UTF-8");
    let mut args = vec!["check", target, "--from-dir", dir];
    args.extend_from_slice(extra);
    mosc_guard(&args)
}

fn check(tree: &str, target: &str, extra: &[&str]) -> CliRun {
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
