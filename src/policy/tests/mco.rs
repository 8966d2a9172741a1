//! One table per rule the policy takes from MCO, each naming the MCO function it mirrors
//! (openshift/machine-config-operator, release-4.20).

use serde_json::{Value, json};

use super::*;
use crate::model::{LABEL_TARGET_POOL, MachineConfigPool, NodeMeta};

const UID: &str = "7c1a6f0e-0000-4000-8000-000000000001";
const OTHER_UID: &str = "7c1a6f0e-0000-4000-8000-000000000002";

/// A MachineOSConfig as a cluster serves it: with a uid, its current image and build.
fn config(pool: &str, uid: &str, current: Option<&str>) -> Value {
    let mut v = mosc(pool, current);
    v["metadata"]["uid"] = json!(uid);
    // As 4.20 writes it: the current build by annotation only.
    v["status"]["machineOSBuild"] = Value::Null;
    if let Some(hex) = current {
        v["metadata"]["annotations"] = json!({"machineconfiguration.openshift.io/current-machine-os-build": format!("{pool}-{}", &hex[..8])});
    }
    v
}

/// A MachineOSBuild as MCO writes it: both labels and a controller ownerReference to `owner`.
fn build(pool: &str, owner: &str, hex: Option<&str>) -> Value {
    let name = format!("{pool}-{}", hex.map_or("building", |h| &h[..8]));
    let mut v = json!({
        "metadata": {
            "name": name,
            "labels": {LABEL_MACHINE_OS_CONFIG: pool, LABEL_TARGET_POOL: pool},
            "ownerReferences": [{"apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineOSConfig", "name": pool, "uid": owner, "controller": true}]
        },
        "spec": {"machineOSConfig": {"name": pool}, "machineConfig": {"name": format!("rendered-{pool}-1")},
                 "renderedImagePushSpec": format!("{REPO}:{name}")},
    });
    if let Some(hex) = hex {
        v["status"] = json!({"digestedImagePushSpec": img(hex),
            "conditions": [{"type": "Succeeded", "status": "True"}]});
    }
    v
}

fn labelled(
    name: &str,
    labels: &[(&str, &str)],
    desired: Option<&str>,
    current: Option<&str>,
) -> Value {
    let mut v = node(name, &[], desired, current, "Done");
    for (k, val) in labels {
        v["metadata"]["labels"][*k] = json!(val);
    }
    v
}

fn selecting(name: &str, selector: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeSelector": selector}})
}

fn role(r: &str) -> Value {
    json!({"matchLabels": {format!("node-role.kubernetes.io/{r}"): ""}})
}

const W: (&str, &str) = ("node-role.kubernetes.io/worker", "");
const M: (&str, &str) = ("node-role.kubernetes.io/master", "");
const I: (&str, &str) = ("node-role.kubernetes.io/infra", "");
const G: (&str, &str) = ("node-role.kubernetes.io/gpu", "");
const WINDOWS: (&str, &str) = ("kubernetes.io/os", "windows");
const LINUX: (&str, &str) = ("kubernetes.io/os", "linux");

/// `helpers.ListPools` + `helpers.GetPoolsForNode` (`GetPrimaryPoolForNode`).
#[test]
fn membership_follows_list_pools_and_get_pools_for_node() {
    let standard = vec![
        selecting("master", role("master")),
        selecting("worker", role("worker")),
        selecting("infra", role("infra")),
        selecting("gpu", role("gpu")),
    ];
    let with = |extra: Value| {
        let mut pools = standard.clone();
        pools.push(extra);
        pools
    };
    type Case<'a> = (
        &'a str,
        Vec<Value>,
        Vec<(&'a str, &'a str)>,
        Option<&'a str>,
    );
    let cases: Vec<Case> = vec![
        ("a worker", standard.clone(), vec![W, LINUX], Some("worker")),
        (
            "a Windows worker (WMCO) is in no pool",
            standard.clone(),
            vec![W, WINDOWS],
            None,
        ),
        ("a master", standard.clone(), vec![M], Some("master")),
        (
            "master and worker: master",
            standard.clone(),
            vec![M, W],
            Some("master"),
        ),
        (
            "master beats one custom pool",
            standard.clone(),
            vec![M, W, I],
            Some("master"),
        ),
        (
            "one custom pool beats worker",
            standard.clone(),
            vec![W, I],
            Some("infra"),
        ),
        (
            "two custom pools: no pool",
            standard.clone(),
            vec![W, I, G],
            None,
        ),
        (
            "two custom pools and master: still no pool",
            standard.clone(),
            vec![M, I, G],
            None,
        ),
        (
            "only a custom pool",
            standard.clone(),
            vec![I],
            Some("infra"),
        ),
        (
            "no pool selects it",
            standard.clone(),
            vec![("edge", "")],
            None,
        ),
        (
            "an empty selector selects nothing",
            with(selecting("stray", json!({}))),
            vec![W],
            Some("worker"),
        ),
        (
            "an empty selector is not a second custom pool",
            with(selecting(
                "stray",
                json!({"matchLabels": {}, "matchExpressions": []}),
            )),
            vec![W, I],
            Some("infra"),
        ),
        (
            "a nil selector selects nothing",
            with(json!({"metadata": {"name": "bare"}, "spec": {}})),
            vec![W, I],
            Some("infra"),
        ),
        (
            "an invalid selector anywhere: ListPools fails for every node",
            with(selecting(
                "broken",
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            )),
            vec![W],
            None,
        ),
        (
            "matchExpressions select like matchLabels",
            vec![
                selecting("worker", role("worker")),
                selecting(
                    "infra",
                    json!({"matchExpressions": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists"}]}),
                ),
            ],
            vec![W, I],
            Some("infra"),
        ),
    ];
    for (what, pools, labels, want) in cases {
        let pools = arcs::<MachineConfigPool>(&pools);
        let node: NodeMeta =
            serde_json::from_value(labelled("n", &labels, None, None)).expect("node");
        assert_eq!(Membership::new(&pools).primary(&node), want, "{what}");
    }
}

/// The pool rule counts, and names, only the nodes MCO places in the pool: `GetNodesForPool`.
#[test]
fn the_pool_rule_counts_only_nodes_mco_places_in_the_pool() {
    let settled = |name: &str, labels: &[(&str, &str)]| {
        labelled(name, labels, Some(&img(NEW)), Some(&img(NEW)))
    };
    type Case<'a> = (
        &'a str,
        &'a str,
        Vec<Value>,
        Vec<Value>,
        Option<Vec<&'a str>>,
    );
    let cases: Vec<Case> = vec![
        (
            "a Windows worker never gets the image: the Linux workers settled",
            "worker",
            vec![selecting("worker", role("worker"))],
            vec![
                settled("w1", &[W, LINUX]),
                settled("w2", &[W, LINUX]),
                labelled("win", &[W, WINDOWS], None, None),
            ],
            None,
        ),
        (
            "a Linux worker not on the image yet is next",
            "worker",
            vec![selecting("worker", role("worker"))],
            vec![
                settled("w1", &[W, LINUX]),
                labelled("w2", &[W, LINUX], None, None),
                labelled("win", &[W, WINDOWS], None, None),
            ],
            Some(vec!["w2"]),
        ),
        (
            "a stray empty-selector pool changes nothing",
            "worker",
            vec![
                selecting("worker", role("worker")),
                selecting("stray", json!({})),
            ],
            vec![settled("w1", &[W]), labelled("w2", &[W], None, None)],
            Some(vec!["w2"]),
        ),
        (
            "compact cluster: masters with a custom role are the master pool's",
            "master",
            vec![
                selecting("master", role("master")),
                selecting("worker", role("worker")),
                selecting("infra", role("infra")),
            ],
            vec![
                settled("m1", &[M, W, I]),
                labelled("m2", &[M, W, I], None, None),
                labelled("m3", &[M, W, I], None, None),
            ],
            Some(vec!["m2", "m3"]),
        ),
        (
            "a node in two custom pools is in none",
            "infra",
            vec![
                selecting("worker", role("worker")),
                selecting("infra", role("infra")),
                selecting("gpu", role("gpu")),
            ],
            vec![
                settled("i1", &[W, I]),
                labelled("both", &[W, I, G], None, None),
            ],
            None,
        ),
        (
            "a worker claimed by a custom pool is that pool's, not worker's",
            "worker",
            vec![
                selecting("worker", role("worker")),
                selecting("infra", role("infra")),
            ],
            vec![settled("w1", &[W]), labelled("i1", &[W, I], None, None)],
            None,
        ),
    ];
    for (what, pool, pools, nodes, want) in cases {
        let snap = Snapshot {
            machine_os_configs: arcs(&[config(pool, UID, Some(NEW))]),
            machine_os_builds: arcs(&[build(pool, UID, Some(NEW))]),
            pools: arcs(&pools),
            nodes: arcs(&nodes),
        };
        let mosc = snap.machine_os_config(pool).expect("config");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        let next: Option<Vec<&str>> = v
            .rolling
            .first()
            .map(|p| p.next_nodes.iter().map(String::as_str).collect());
        assert_eq!(next, want, "{what}: {v:?}");
        assert_eq!(v.allowed, want.is_none(), "{what}");
        if let Some(p) = v.rolling.first() {
            assert_eq!(p.pending_nodes, Some(p.next_nodes.len()), "{what}");
        }
    }
}

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
            "a build a recreated config of the same name controls (OCPBUGS-85117)",
            config("worker", UID, Some(NEW)),
            vec![build("worker", OTHER_UID, Some(NEW))],
            false,
        ),
        (
            "an orphan build (no ownerReference)",
            config("worker", UID, Some(NEW)),
            vec![orphan],
            false,
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
        };
        let mosb = &snap.machine_os_builds[0];
        let v = evaluate(&snap, Deletion::MachineOSBuild(mosb), PolicyMode::InFlight);
        assert_eq!(!v.allowed, guarded, "{what}: {v:?}");
    }
}

/// `node_controller.canLayeredContinue`: a failed build for the pool's rendered config stops the
/// rollout, so the config's current image (of an earlier config) goes to no further node.
#[test]
fn a_failed_build_for_the_pools_config_ends_the_pool_rule() {
    let mut pool = selecting("worker", role("worker"));
    pool["spec"]["configuration"] = json!({"name": "rendered-worker-2"});
    let mut failed = build("worker", UID, None);
    failed["metadata"]["name"] = json!("worker-failed");
    failed["spec"]["machineConfig"]["name"] = json!("rendered-worker-2");
    failed["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}]});
    let mut running = failed.clone();
    running["status"] = json!({"conditions": [{"type": "Building", "status": "True"}]});
    let nodes = vec![
        labelled("w1", &[W], Some(&img(NEW)), Some(&img(NEW))),
        labelled("w2", &[W], None, None),
    ];
    for (what, next, rolling) in [("failed", failed, false), ("still building", running, true)] {
        let snap = Snapshot {
            machine_os_configs: arcs(&[config("worker", UID, Some(NEW))]),
            machine_os_builds: arcs(&[build("worker", UID, Some(NEW)), next]),
            pools: arcs(&[pool.clone()]),
            nodes: arcs(&nodes),
        };
        let mosc = snap.machine_os_config("worker").expect("config");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        assert_eq!(!v.rolling.is_empty(), rolling, "{what}: {v:?}");
    }
}
