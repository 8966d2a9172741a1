//! MCO's own build pipeline in a must-gather (tests/fixtures/superseded-build, 4.20.8): the
//! worker pool was rolling out its image (one node sent to it, two not yet) when an admin
//! changed a MachineConfig; build B for the new rendered config failed, the fix (a new
//! Containerfile) created C, and MCO's `startBuild` is about to delete B
//! (`deleteOtherBuildsForMachineOSConfig`). 4.20 names B as the config's current build since it
//! started, while the config's image is still the first build's.

use super::*;

const FAILED: &str = "machineosbuild/worker-3c1e5a7b9d0f2e4c6a8b1d3f5e7a9c0b";
const PENDING: &str = "machineosbuild/worker-6f0a2c4e8b1d3f5a7c9e0b2d4f6a8c1e";

/// A build that pushed nothing guards nothing: the failed one, and the one not started yet.
#[test]
fn a_superseded_build_that_pushed_nothing_may_go_at_once() {
    for target in [FAILED, PENDING] {
        let run = check("superseded-build", target, &["-o", "json"]);
        assert_eq!(run.code, Some(0), "{target}: {run:?}");
        let report = run.json();
        assert_eq!(report["images"], json!([]), "{target}");
        assert_eq!(report["allowed"], true, "{target}");
    }
    // The build that did push is still guarded: the node sent to its image needs it.
    let run = check("superseded-build", &format!("machineosbuild/{MOSB}"), &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
}

/// The build for the pool's new rendered config failed, so MCO sends no further node to the
/// config's image (`canLayeredContinue`): no pool rule, only the node already sent blocks, and
/// the denial does not promise that MCO updates the others next.
#[test]
fn a_stopped_rollout_blocks_only_by_the_node_already_sent() {
    let run = check("superseded-build", "worker", &["-o", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(blocking_names(&report), [ROLLING_NODE]);
    assert_eq!(report["rollingPools"], json!([]));
    let run = check("superseded-build", "worker", &[]);
    assert!(!run.stdout.contains("MCO updates"), "{run:?}");
    assert!(
        run.stdout
            .contains("Wait until those nodes report state Done on that image"),
        "{run:?}"
    );
}

/// Liveness: once that node has reached the image, the same deletion is allowed, although two
/// workers never got the image (MCO is not sending them any).
#[test]
fn the_deletion_goes_through_once_the_node_sent_arrives() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_tree(&fixture("superseded-build"), dir.path(), &|_| true);
    let node = find(dir.path(), &format!("{ROLLING_NODE}.yaml")).expect("the rolling node");
    let text = fs::read_to_string(&node).expect("node");
    let arrived = text
        .replace(
            "machineconfiguration.openshift.io/state: Working",
            "machineconfiguration.openshift.io/state: Done",
        )
        .replace(
            &format!("machineconfiguration.openshift.io/desiredImage: {IMAGE}"),
            &format!(
                "machineconfiguration.openshift.io/desiredImage: {IMAGE}\n    machineconfiguration.openshift.io/currentImage: {IMAGE}"
            ),
        );
    assert_ne!(arrived, text, "the node fixture changed");
    fs::write(&node, arrived).expect("write node");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Some(found) = find(&path, name) {
                return Some(found);
            }
        } else if entry.file_name().to_str() == Some(name) {
            return Some(path);
        }
    }
    None
}
