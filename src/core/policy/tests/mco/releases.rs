//! The release rules applied: 4.19's label-only cleanup (`deleteMachineOSConfig` without
//! `IsControlledBy`), and from 4.21 on the Machine Config Server's image for joining machines
//! (`clusterServer.resolveDesiredImageForPool`).

use serde_json::{Value, json};

use super::*;

const QUAY: &str = "quay.io/example/ocb-image";

fn quay(hex: &str) -> String {
    format!("{QUAY}@sha256:{hex}")
}

/// A layered worker pool on an external registry, settled (every node on the image, one machine
/// updated), with `machines` and the release `release`.
fn cluster(release: Option<&str>, machines: Vec<Value>) -> Snapshot {
    let mut mosc = config("worker", UID, Some(NEW));
    mosc["status"]["currentImagePullSpec"] = json!(quay(NEW));
    let mut mosb = build("worker", UID, Some(NEW));
    mosb["status"]["digestedImagePushSpec"] = json!(quay(NEW));
    let mut pool = selecting("worker", role("worker"));
    pool["spec"]["configuration"] = json!({"name": "rendered-worker-1"});
    pool["status"] = json!({"configuration": {"name": "rendered-worker-1"}, "machineCount": 2, "updatedMachineCount": 2});
    Snapshot {
        machine_os_configs: arcs(&[mosc]),
        machine_os_builds: arcs(&[mosb]),
        pools: arcs(&[pool]),
        nodes: arcs(&[labelled("w1", &[W], Some(&quay(NEW)), Some(&quay(NEW)))]),
        machines: arcs(&machines),
        release: release.map(ClusterRelease::given).unwrap_or_default(),
    }
}

fn machine(name: &str, phase: &str, secret: &str, node: Option<&str>) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "openshift-machine-api",
                     "labels": {"machine.openshift.io/cluster-api-machineset": "ci-worker-a"}},
        "spec": {"providerSpec": {"value": {"userDataSecret": {"name": secret}}}},
        "status": {"phase": phase, "nodeRef": node.map(|n| json!({"kind": "Node", "name": n}))}
    })
}

fn decide_worker(snap: &Snapshot) -> Verdict {
    let mosc = snap.machine_os_config("worker").expect("worker");
    evaluate(snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight)
}

fn joining(v: &Verdict) -> Vec<&str> {
    v.joining.iter().map(|m| m.machine.as_str()).collect()
}

#[test]
fn a_joining_machine_blocks_from_4_21_on() {
    let provisioning = || {
        vec![machine(
            "ci-worker-a-x1",
            "Provisioned",
            "worker-user-data",
            None,
        )]
    };
    for (release, blocks) in [
        (Some("4.19.12"), false),
        (Some("4.20.8"), false),
        (Some("4.21.3"), true),
        (Some("4.22.1"), true),
        (Some("4.23.0"), true),
        (None, true),
        (Some("4.30.0"), true),
    ] {
        let v = decide_worker(&cluster(release, provisioning()));
        assert_eq!(!v.joining.is_empty(), blocks, "{release:?}: {v:?}");
        assert_eq!(v.allowed, !blocks, "{release:?}");
        assert_eq!(
            v.rules.cautious(),
            matches!(release, None | Some("4.30.0")),
            "{release:?}"
        );
    }
    let v = decide_worker(&cluster(Some("4.21.3"), provisioning()));
    assert_eq!(joining(&v), ["openshift-machine-api/ci-worker-a-x1"]);
    assert_eq!(v.joining[0].pool, "worker");
    assert!(v.joining[0].pool_known);
    let msg = message::denial(&v);
    assert!(
        msg.contains("1 joining machine pulls an image built from it at first boot"),
        "{msg}"
    );
    assert!(msg.contains("machine openshift-machine-api/ci-worker-a-x1 (Provisioned, MachineSet ci-worker-a, pool worker)"), "{msg}");
    assert!(
        msg.contains("oc scale machineset ci-worker-a -n openshift-machine-api"),
        "{msg}"
    );
}

#[test]
fn only_machines_the_mcs_would_serve_the_image_count() {
    let on = |machines| decide_worker(&cluster(Some("4.21.3"), machines));
    // Running, or Provisioned with its Node registered: not joining any more.
    assert!(
        on(vec![machine("m", "Running", "worker-user-data", None)])
            .joining
            .is_empty()
    );
    assert!(
        on(vec![machine(
            "m",
            "Provisioned",
            "worker-user-data",
            Some("n")
        )])
        .joining
        .is_empty()
    );
    // Another pool's user data: that pool's MCS config, without this image.
    let mut snap = cluster(
        Some("4.21.3"),
        vec![machine("m", "Provisioning", "infra-user-data", None)],
    );
    let mut infra = selecting("infra", role("infra"));
    infra["status"] = json!({"updatedMachineCount": 1});
    snap.pools.push(arcs(&[infra]).remove(0));
    assert!(decide_worker(&snap).joining.is_empty());
    // A secret that names no pool: it could join any, so it counts.
    let v = on(vec![machine("m", "Provisioning", "custom-ignition", None)]);
    assert_eq!(joining(&v), ["openshift-machine-api/m"]);
    assert!(!v.joining[0].pool_known);
}

#[test]
fn the_mcs_serves_the_image_only_as_resolve_desired_image_for_pool_does() {
    let joining_one = || vec![machine("m", "Provisioning", "worker-user-data", None)];
    // No machine of the pool updated yet: the MCS serves the base image.
    let mut snap = cluster(Some("4.21.3"), joining_one());
    let mut pool = selecting("worker", role("worker"));
    pool["spec"]["configuration"] = json!({"name": "rendered-worker-1"});
    pool["status"] =
        json!({"configuration": {"name": "rendered-worker-0"}, "updatedMachineCount": 0});
    snap.pools = arcs(&[pool]);
    assert!(
        decide_worker(&snap).joining.is_empty(),
        "no machine updated"
    );
    // The internal registry: a joining machine cannot resolve its Service before it joins.
    let mut snap = cluster(Some("4.21.3"), joining_one());
    let mut mosc = config("worker", UID, Some(NEW));
    mosc["status"]["currentImagePullSpec"] = json!(img(NEW));
    snap.machine_os_configs = arcs(&[mosc]);
    snap.machine_os_builds = arcs(&[build("worker", UID, Some(NEW))]);
    assert!(decide_worker(&snap).joining.is_empty(), "internal registry");
    // A build for the served config that has not succeeded: nothing served yet.
    let mut snap = cluster(Some("4.21.3"), joining_one());
    let mut running = build("worker", UID, Some(NEW));
    running["status"]["conditions"] = json!([{"type": "Building", "status": "True"}]);
    running["status"]["digestedImagePushSpec"] = json!(quay(NEW));
    snap.machine_os_builds = arcs(&[running]);
    assert!(
        decide_worker(&snap).joining.is_empty(),
        "build not succeeded"
    );
}

#[test]
fn a_build_deletion_of_the_served_image_is_blocked_too() {
    let snap = cluster(
        Some("4.23.1"),
        vec![machine("m", "Provisioning", "worker-user-data", None)],
    );
    let mosb = &snap.machine_os_builds[0];
    let v = evaluate(&snap, Deletion::MachineOSBuild(mosb), PolicyMode::InFlight);
    assert_eq!(joining(&v), ["openshift-machine-api/m"]);
    assert!(!v.allowed);
}

/// `deleteMachineOSConfig` on a config recreated with the same name: the old config's build
/// (another controller uid) is deleted by label on 4.19 and on the z-streams of 4.20 to 4.22
/// before the controller filter (release-4.20 #6305, 4.21 #6138, 4.22 #6115), which no version
/// string tells apart; 4.23 has the filter in every z-stream.
#[test]
fn the_old_configs_build_counts_as_deleted_by_label_until_4_23() {
    let mut snap = cluster(None, vec![]);
    snap.machine_os_builds = arcs(&[build("worker", OTHER_UID, Some(NEW))]);
    snap.nodes = arcs(&[labelled("w1", &[W], Some(&img(NEW)), Some(&img(OLD)))]);
    for (release, guarded) in [
        ("4.19.12", true),
        ("4.20.2", true),
        ("4.20.19", true),
        ("4.21.1", true),
        ("4.22.9", true),
        ("4.23.0", false),
        ("4.24.0", true),
    ] {
        snap.release = ClusterRelease::given(release);
        let v = decide_worker(&snap);
        assert_eq!(!v.images.is_empty(), guarded, "{release}: {v:?}");
        assert_eq!(!v.allowed, guarded, "{release}");
    }
    // An upgrade from 4.22 to 4.23 in flight: 4.22's builder still cleans up by label.
    snap.release = ClusterRelease {
        desired: Some("4.23.0".into()),
        also_running: vec!["4.22.9".into()],
        upgrading: true,
    };
    let v = decide_worker(&snap);
    assert!(!v.allowed, "both rows: {v:?}");
    assert_eq!(v.rules.row_names(), ["4.22", "4.23"]);
    let msg = message::denial(&v);
    assert!(
        msg.ends_with(
            "Decided with the most cautious of the rules of OpenShift 4.22 and 4.23 (an upgrade \
             to 4.23.0 is in flight; MCO's builder of 4.22.9 may still run)."
        ),
        "{msg}"
    );
}
