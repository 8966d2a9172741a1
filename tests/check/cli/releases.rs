//! `check --from-dir` by release, read from the dump's ClusterVersion (or
//! `--openshift-version`), as the webhook reads the cluster's:
//! - tests/fixtures/scale-up-4.21: a settled layered worker pool on an external registry
//!   scaling up, one Machine Provisioned without a Node: refused on 4.21, where the Machine
//!   Config Server serves the layered image to joining machines, allowed on 4.20;
//! - tests/fixtures/recreated-orphan: a MachineOSConfig recreated with the same name whose
//!   current build is the first config's, orphaned (no ownerReference), while a node still
//!   pulls its image: refused on every 4.20 to 4.22 z-stream (cleanup by label until the
//!   controller filter landed, which a version string cannot tell), allowed on 4.23, and
//!   refused while an upgrade from 4.22 to 4.23 is in flight (4.22's builder still runs),
//!   allowed once it completed.

use std::path::Path;

use super::*;

const MACHINE: &str = "openshift-machine-api/ci-worker-us-east-2a-7kz2p";
const VERSION_FILE: &str =
    "cluster-scoped-resources/config.openshift.io/clusterversions/version.yaml";

/// A copy of fixture `tree` whose ClusterVersion `version.yaml` (found anywhere below it) is
/// replaced by `edit` of its text, or removed when `edit` returns `None`.
fn with_cluster_version(tree: &str, edit: impl Fn(&str) -> Option<String>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_tree(&fixture(tree), dir.path(), &|_| true);
    let file = find_version_file(dir.path()).expect("the fixture has a ClusterVersion");
    let text = fs::read_to_string(&file).expect("version file");
    match edit(&text) {
        Some(new) => fs::write(&file, new).expect("write version"),
        None => fs::remove_file(&file).expect("remove version"),
    }
    dir
}

fn find_version_file(dir: &Path) -> Option<PathBuf> {
    let direct = dir.join(VERSION_FILE);
    if direct.exists() {
        return Some(direct);
    }
    fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_version_file(&e.path()))
}

/// The scale-up fixture saying `version` (or without a ClusterVersion).
fn scale_up_on(version: Option<&str>) -> tempfile::TempDir {
    with_cluster_version("scale-up-4.21", |text| {
        version.map(|v| text.replace("4.21.3", v))
    })
}

#[test]
fn a_4_21_must_gather_with_a_provisioning_machine_refuses_and_names_it() {
    let run = check("scale-up-4.21", "worker", &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stdout.contains(&format!("machine {MACHINE} (Provisioned, MachineSet ci-worker-us-east-2a, pool worker) is joining")), "{run:?}");
    assert!(run.stdout.contains("Wait until it has joined"), "{run:?}");
    assert!(
        run.stdout
            .contains("oc scale machineset ci-worker-us-east-2a"),
        "{run:?}"
    );
    // The running machine with its Node is not joining.
    assert!(!run.stdout.contains("1q8x"), "{run:?}");
    assert!(
        run.stdout
            .ends_with("Decided with the rules of OpenShift 4.21 (the cluster runs 4.21.3).\n"),
        "{run:?}"
    );

    let run = check("scale-up-4.21", "worker", &["-o", "json"]);
    assert_eq!(run.code, Some(1));
    let report = run.json();
    assert_eq!(report["release"]["version"], "4.21.3");
    assert_eq!(report["release"]["rules"], json!(["4.21"]));
    assert_eq!(report["joiningMachines"][0]["machine"], MACHINE);
    assert_eq!(report["joiningMachines"][0]["poolKnown"], true);
    assert_eq!(report["blockingNodes"], json!([]));
}

#[test]
fn the_same_must_gather_on_4_20_allows() {
    let dir = scale_up_on(Some("4.20.8"));
    let run = check_dir(dir.path(), "worker", &["-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["release"]["rules"], json!(["4.20"]));
    assert_eq!(report["joiningMachines"], json!([]));
    // --openshift-version overrides what the dump says.
    let run = check(
        "scale-up-4.21",
        "worker",
        &["--openshift-version", "4.20.8"],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let run = check_dir(dir.path(), "worker", &["--openshift-version", "4.23.1"]);
    assert_eq!(run.code, Some(1), "{run:?}");
}

#[test]
fn an_unknown_release_takes_the_cautious_rules_and_says_so() {
    for version in [None, Some("4.27.0")] {
        let dir = scale_up_on(version);
        let run = check_dir(dir.path(), "worker", &["-o", "json"]);
        assert_eq!(run.code, Some(1), "{version:?}: {run:?}");
        let report = run.json();
        assert_eq!(
            report["release"]["rules"],
            json!(["unknown"]),
            "{version:?}"
        );
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
    let dir = scale_up_on(Some("4.21.3"));
    let file = dir
        .path()
        .join("namespaces/openshift-machine-api/machine.openshift.io/machines/ci-worker-us-east-2a-7kz2p.yaml");
    let text = fs::read_to_string(&file).expect("machine");
    let cut = text.find("userDataSecret").expect("secret") + 6;
    fs::write(&file, &text[..cut]).expect("truncate");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("machines/ci-worker-us-east-2a-7kz2p.yaml"),
        "{run:?}"
    );
}

/// The recreated-orphan must-gather on `version` (the dump says 4.20.3, an early z-stream).
fn orphan_on(version: &str) -> tempfile::TempDir {
    with_cluster_version("recreated-orphan", |text| {
        Some(
            text.replace("4.20.3", version)
                .replace("stable-4.20", "stable-x"),
        )
    })
}

#[test]
fn a_recreated_configs_orphaned_build_is_guarded_by_label_until_4_23() {
    for (version, refused, rules) in [
        ("4.20.3", true, "4.20"),
        ("4.20.19", true, "4.20"),
        ("4.21.9", true, "4.21"),
        ("4.22.7", true, "4.22"),
        ("4.23.0", false, "4.23"),
    ] {
        let dir = orphan_on(version);
        let run = check_dir(dir.path(), "worker", &["-o", "json"]);
        assert_eq!(run.code, Some(i32::from(refused)), "{version}: {run:?}");
        let report = run.json();
        assert_eq!(report["release"]["rules"], json!([rules]), "{version}");
        if refused {
            assert_eq!(report["images"][0]["machineOSBuild"], MOSB, "{version}");
            assert_eq!(blocking_names(&report), [ROLLING_NODE], "{version}");
        } else {
            assert_eq!(
                report["images"],
                json!([]),
                "{version}: 4.23 deletes no build it does not control"
            );
        }
    }
}

/// An upgrade from 4.22 to 4.23 in flight: `status.desired` is 4.23.0 but MCO's 4.22 builder
/// runs until the machine-config-operator is upgraded, so its cleanup by label still counts;
/// once the history's newest entry is Completed on 4.23.0, 4.23's rules alone decide.
#[test]
fn an_upgrade_in_flight_decides_with_both_releases_until_it_completes() {
    let upgrade = |state: &str, progressing: &str, completion: &str| {
        let (state, progressing, completion) = (
            state.to_string(),
            progressing.to_string(),
            completion.to_string(),
        );
        with_cluster_version("recreated-orphan", move |text| {
            let mut cv: Value = serde_yaml_ng::from_str(text).expect("ClusterVersion");
            let previous = cv["status"]["history"][0].clone();
            let mut entry = previous.clone();
            entry["version"] = json!("4.23.0");
            entry["state"] = json!(state);
            entry["completionTime"] = serde_json::from_str(&completion).expect("time");
            entry["image"] = json!(
                "quay.io/openshift-release-dev/ocp-release@sha256:4dd0d3bd0c5b8ab4c7b4c06e3ef8b8f1dbf6cf8c1a4e1a2e2f7c1e9d6b4a2c0f"
            );
            let mut prev = previous;
            prev["version"] = json!("4.22.7");
            cv["status"]["history"] = json!([entry, prev]);
            cv["status"]["desired"]["version"] = json!("4.23.0");
            for c in cv["status"]["conditions"]
                .as_array_mut()
                .expect("conditions")
            {
                if c["type"] == "Progressing" {
                    c["status"] = json!(progressing);
                }
            }
            Some(serde_yaml_ng::to_string(&cv).expect("yaml"))
        })
    };
    let dir = upgrade("Partial", "True", "null");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stdout.ends_with(
            "Decided with the most cautious of the rules of OpenShift 4.22 and 4.23 (an upgrade to \
             4.23.0 is in flight; MCO's builder of 4.22.7 may still run).\n"
        ),
        "{run:?}"
    );
    let report = check_dir(dir.path(), "worker", &["-o", "json"]).json();
    assert_eq!(report["release"]["rules"], json!(["4.22", "4.23"]));
    assert_eq!(report["release"]["alsoRunning"], json!(["4.22.7"]));
    assert_eq!(report["release"]["upgrading"], true);

    // Completed: the same deletion is allowed.
    let dir = upgrade("Completed", "False", "\"2026-11-30T04:10:00Z\"");
    let run = check_dir(dir.path(), "worker", &["-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.json()["release"]["rules"], json!(["4.23"]));
}
