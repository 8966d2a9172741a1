//! MCO's own build pipeline, as the guard must read it so as never to stand in its way: the
//! node controller's `canLayeredContinue` (when further nodes are sent to the config's image)
//! and the builds `deleteOtherBuildsForMachineOSConfig` supersedes, which pushed nothing.

use serde_json::{Value, json};

use super::*;

const R1: &str = "rendered-worker-1";
const R2: &str = "rendered-worker-2";

/// The worker pool targeting `rendered`, rolling out NEW (the config's image, built by
/// `worker-01971ade` for R1): w1 on it, w2 sent to it (desired NEW, not reached), w3 not sent.
fn rolling_out(rendered: &str, extra: Vec<Value>) -> Snapshot {
    let mut pool = selecting("worker", role("worker"));
    pool["spec"]["configuration"] = json!({"name": rendered});
    let mut builds = vec![build("worker", UID, Some(NEW))];
    builds.extend(extra);
    Snapshot {
        machine_os_configs: arcs(&[config("worker", UID, Some(NEW))]),
        machine_os_builds: arcs(&builds),
        pools: arcs(&[pool]),
        nodes: arcs(&[
            labelled("w1", &[W], Some(&img(NEW)), Some(&img(NEW))),
            labelled("w2", &[W], Some(&img(NEW)), Some(&img(OLD))),
            labelled("w3", &[W], Some(&img(OLD)), Some(&img(OLD))),
        ]),
        release: ClusterRelease::given(REL_4_20),
        ..Default::default()
    }
}

/// A build `name` of the worker config for `rendered`, in `state`.
fn build_for(name: &str, rendered: &str, state: &str) -> Value {
    let mut b = build("worker", UID, None);
    b["metadata"]["name"] = json!(name);
    b["spec"]["machineConfig"]["name"] = json!(rendered);
    b["spec"]["renderedImagePushSpec"] = json!(format!("{REPO}:{name}"));
    let cond = |t: &str| json!([{"type": t, "status": "True"}]);
    b["status"] = match state {
        "pending" => json!({}),
        "running" => json!({"conditions": cond("Building")}),
        "failed" => json!({"conditions": cond("Failed")}),
        "interrupted" => json!({"conditions": cond("Interrupted")}),
        "succeeded-elsewhere" => {
            json!({"conditions": cond("Succeeded"), "digestedImagePushSpec": img(INFRA)})
        }
        _ => panic!("state {state}"),
    };
    b
}

fn decide_config(snap: &Snapshot) -> Verdict {
    let mosc = snap.machine_os_config("worker").expect("worker");
    evaluate(snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight)
}

fn decide_build(snap: &Snapshot, name: &str) -> Verdict {
    let mosb = snap.machine_os_build(name).expect("build");
    evaluate(snap, Deletion::MachineOSBuild(mosb), PolicyMode::InFlight)
}

fn names(v: &Verdict) -> Vec<&str> {
    v.blocking.iter().map(|b| b.node.as_str()).collect()
}

/// `canLayeredContinue`: the pool rule holds only while the build for the pool's
/// `spec.configuration` has Succeeded with the config's current image (`MachineOSBuildIsCurrent`).
/// Otherwise MCO sends no further node (w3 stays), and only the node already sent (w2) blocks.
#[test]
fn the_pool_rule_holds_only_while_mco_sends_nodes_to_the_image() {
    type Case = (&'static str, &'static str, Vec<Value>, bool);
    let cases: Vec<Case> = vec![
        (
            "the build for the pool's config is current",
            R1,
            vec![],
            true,
        ),
        (
            "a new config's build is pending",
            R2,
            vec![build_for("worker-b", R2, "pending")],
            false,
        ),
        (
            "a new config's build is running",
            R2,
            vec![build_for("worker-b", R2, "running")],
            false,
        ),
        (
            "a new config's build failed",
            R2,
            vec![build_for("worker-b", R2, "failed")],
            false,
        ),
        (
            "a new config's build was interrupted",
            R2,
            vec![build_for("worker-b", R2, "interrupted")],
            false,
        ),
        ("a new config has no build yet", R2, vec![], false),
        (
            "a new config's build succeeded, the config not updated yet",
            R2,
            vec![build_for("worker-b", R2, "succeeded-elsewhere")],
            false,
        ),
        (
            "a failed and a current build for the same config: MCO may pick either",
            R1,
            vec![build_for("worker-b", R1, "failed")],
            true,
        ),
    ];
    for (what, rendered, extra, rolling) in cases {
        let v = decide_config(&rolling_out(rendered, extra));
        assert_eq!(!v.rolling.is_empty(), rolling, "{what}: {v:?}");
        assert_eq!(
            names(&v),
            ["w2"],
            "{what}: the node already sent blocks by itself"
        );
        let msg = message::denial(&v);
        assert_eq!(msg.contains("MCO updates"), rolling, "{what}: {msg}");
    }
    // The spelling counts: MCO compares the build's digest with the config's image as strings.
    let mut snap = rolling_out(R1, vec![]);
    let mut respelled = build("worker", UID, Some(NEW));
    respelled["status"]["digestedImagePushSpec"] = json!(format!("{REPO}:x@sha256:{NEW}"));
    snap.machine_os_builds = arcs(&[respelled]);
    assert!(
        decide_config(&snap).rolling.is_empty(),
        "not MachineOSBuildIsCurrent"
    );
    // A pool whose rendered config the objects do not show: cannot be told, the rule holds.
    let mut snap = rolling_out(R2, vec![]);
    snap.pools = arcs(&[selecting("worker", role("worker"))]);
    assert!(!decide_config(&snap).rolling.is_empty());
}

/// Liveness: once the node already sent has reached the image, a stopped rollout blocks
/// nothing, and the same deletion goes through.
#[test]
fn a_stopped_rollout_releases_the_deletion_once_the_sent_nodes_arrive() {
    let mut snap = rolling_out(R2, vec![build_for("worker-b", R2, "failed")]);
    assert!(!decide_config(&snap).allowed);
    snap.nodes = arcs(&[
        labelled("w1", &[W], Some(&img(NEW)), Some(&img(NEW))),
        labelled("w2", &[W], Some(&img(NEW)), Some(&img(NEW))),
        labelled("w3", &[W], Some(&img(OLD)), Some(&img(OLD))),
    ]);
    let v = decide_config(&snap);
    assert!(v.allowed, "{v:?}");
}

/// The pipeline: mid-rollout, a config change starts build B for R2, which 4.19/4.20
/// name as current at once (annotation) while the config's image is still A's; B fails; the fix
/// starts C, and MCO first deletes B (`deleteOtherBuildsForMachineOSConfig`). B pushed nothing
/// (its tag is its own name): its deletion removes nothing and is allowed at once.
#[test]
fn a_superseded_build_that_pushed_nothing_guards_nothing() {
    for state in ["failed", "running", "pending"] {
        let mut snap = rolling_out(R2, vec![build_for("worker-b", R2, state)]);
        let mut mosc = config("worker", UID, Some(NEW));
        mosc["metadata"]["annotations"] =
            json!({"machineconfiguration.openshift.io/current-machine-os-build": "worker-b"});
        snap.machine_os_configs = arcs(&[mosc.clone()]);
        let v = decide_build(&snap, "worker-b");
        assert!(v.images.is_empty() && v.allowed, "{state}: {v:?}");
        // 4.21 on: the status names the previous build, the annotation the new one.
        mosc["status"]["machineOSBuild"] = json!({"name": "worker-01971ade"});
        snap.machine_os_configs = arcs(&[mosc]);
        assert!(decide_build(&snap, "worker-b").allowed, "{state}");
    }
}

/// A same-name rebuild (the rebuild annotation, a rebuild of a build whose image is gone): the
/// config's image came from an earlier build of this very name, whose tag it still is, so the
/// rebuild guards it until it has pushed its own.
#[test]
fn a_same_name_rebuild_guards_the_image_its_tag_still_holds() {
    let name = "worker-01971ade";
    let mut rebuilding = build_for(name, R1, "running");
    rebuilding["metadata"]["name"] = json!(name);
    let mut snap = rolling_out(R1, vec![]);
    snap.machine_os_builds = arcs(&[rebuilding]);
    let v = decide_build(&snap, name);
    assert_eq!(v.images.len(), 1, "{v:?}");
    assert_eq!(v.images[0].image, img(NEW));
    assert!(!v.allowed, "w2 still needs it");
    // The same build named by 4.21's status instead of the annotation.
    let mut mosc = config("worker", UID, Some(NEW));
    mosc["metadata"]["annotations"] = json!({});
    mosc["status"]["machineOSBuild"] = json!({"name": name});
    snap.machine_os_configs = arcs(&[mosc]);
    assert!(!decide_build(&snap, name).allowed);
    // Another build of the config carries the image: it came from there, not from this tag.
    let mut other = build("worker", UID, Some(NEW));
    other["metadata"]["name"] = json!("worker-elsewhere");
    snap.machine_os_builds.push(arcs(&[other]).remove(0));
    assert!(decide_build(&snap, name).images.is_empty());
}
