//! `check --from-dir` by release: the same must-gather of a 4.21 cluster scaling up its
//! workers (tests/fixtures/scale-up-4.21: a settled layered worker pool on an external
//! registry, one Machine Provisioned without a Node) is refused on 4.21, where the Machine
//! Config Server serves the layered image to joining machines, and allowed on 4.20, where it
//! does not. The release comes from the dump's ClusterVersion, or `--openshift-version`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const MACHINE: &str = "openshift-machine-api/ci-worker-us-east-2a-7kz2p";
const VERSION_FILE: &str =
    "cluster-scoped-resources/config.openshift.io/clusterversions/version.yaml";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scale-up-4.21")
}

/// `mosc-guard check worker --from-dir DIR ARGS...`: exit code, stdout, stderr.
fn check(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mosc-guard"))
        .args(["check", "worker", "--from-dir"])
        .arg(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env_remove("MOSC_GUARD_LOG_FORMAT")
        .env_remove("MOSC_GUARD_OPENSHIFT_VERSION")
        .output()
        .expect("the mosc-guard binary runs");
    (
        out.status.code().expect("exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The fixture with its ClusterVersion saying `version` (or without one).
fn on_release(version: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy(&fixture(), dir.path());
    let file = dir.path().join(VERSION_FILE);
    match version {
        Some(v) => {
            let text = std::fs::read_to_string(&file).expect("version file");
            std::fs::write(&file, text.replace("4.21.3", v)).expect("write version");
        }
        None => std::fs::remove_file(&file).expect("remove version"),
    }
    dir
}

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let dst = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dst).expect("mkdir");
            copy(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), dst).expect("copy");
        }
    }
}

#[test]
fn a_4_21_must_gather_with_a_provisioning_machine_refuses_and_names_it() {
    let (code, stdout, stderr) = check(&fixture(), &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains(&format!("machine {MACHINE} (Provisioned, MachineSet ci-worker-us-east-2a, pool worker) is joining")), "{stdout}");
    assert!(stdout.contains("Wait until it has joined"), "{stdout}");
    assert!(
        stdout.contains("oc scale machineset ci-worker-us-east-2a"),
        "{stdout}"
    );
    // The running machine with its Node is not joining.
    assert!(!stdout.contains("1q8x"), "{stdout}");

    let (code, stdout, _) = check(&fixture(), &["-o", "json"]);
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["release"]["version"], "4.21.3");
    assert_eq!(report["release"]["rules"], "4.21");
    assert_eq!(report["joiningMachines"][0]["machine"], MACHINE);
    assert_eq!(report["joiningMachines"][0]["poolKnown"], true);
    assert_eq!(report["blockingNodes"], Value::Array(vec![]));
}

#[test]
fn the_same_must_gather_on_4_20_allows() {
    let dir = on_release(Some("4.20.8"));
    let (code, stdout, stderr) = check(dir.path(), &["-o", "json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["release"]["rules"], "4.20");
    assert_eq!(report["joiningMachines"], Value::Array(vec![]));
    // --openshift-version overrides what the dump says.
    let (code, ..) = check(&fixture(), &["--openshift-version", "4.20.8"]);
    assert_eq!(code, 0);
    let (code, ..) = check(dir.path(), &["--openshift-version", "4.23.1"]);
    assert_eq!(code, 1);
}

#[test]
fn an_unknown_release_takes_the_cautious_rules_and_says_so() {
    for version in [None, Some("4.27.0")] {
        let dir = on_release(version);
        let (code, stdout, stderr) = check(dir.path(), &["-o", "json"]);
        assert_eq!(code, 1, "{version:?}: {stdout}{stderr}");
        let report: Value = serde_json::from_str(&stdout).expect("json");
        assert_eq!(report["release"]["rules"], "unknown", "{version:?}");
        let warned = report["warnings"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w.as_str()
                    .is_some_and(|w| w.contains("most cautious rules"))
            })
        });
        assert!(warned, "{version:?}: {report}");
    }
}

#[test]
fn a_machine_file_cut_short_makes_the_dump_incomplete() {
    let dir = on_release(Some("4.21.3"));
    let file = dir
        .path()
        .join("namespaces/openshift-machine-api/machine.openshift.io/machines/ci-worker-us-east-2a-7kz2p.yaml");
    let text = std::fs::read_to_string(&file).expect("machine");
    let cut = text.find("userDataSecret").expect("secret") + 6;
    std::fs::write(&file, &text[..cut]).expect("truncate");
    let (code, stdout, stderr) = check(dir.path(), &[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("machines/ci-worker-us-east-2a-7kz2p.yaml"),
        "{stderr}"
    );
}
