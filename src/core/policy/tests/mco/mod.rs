//! One table per rule the policy takes from MCO, each naming the MCO function it mirrors
//! (openshift/machine-config-operator, release-4.20): membership and the pool rule here, what
//! is deleted and what "reached" means in [`deleted`].

mod deleted;
mod pipeline;
mod releases;

use serde_json::{Value, json};

use super::*;
use crate::core::model::{LABEL_TARGET_POOL, MachineConfigPool};
use crate::core::node::NodeMeta;

/// The release these rules are 4.20's from.
pub(super) const REL_4_20: &str = "4.20.8";
pub(super) const UID: &str = "7c1a6f0e-0000-4000-8000-000000000001";
pub(super) const OTHER_UID: &str = "7c1a6f0e-0000-4000-8000-000000000002";

/// A MachineOSConfig as a cluster serves it: with a uid, its current image and build.
pub(super) fn config(pool: &str, uid: &str, current: Option<&str>) -> Value {
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
pub(super) fn build(pool: &str, owner: &str, hex: Option<&str>) -> Value {
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

pub(super) fn labelled(
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

pub(super) fn selecting(name: &str, selector: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeSelector": selector}})
}

pub(super) fn role(r: &str) -> Value {
    json!({"matchLabels": {format!("node-role.kubernetes.io/{r}"): ""}})
}

pub(super) const W: (&str, &str) = ("node-role.kubernetes.io/worker", "");
pub(super) const M: (&str, &str) = ("node-role.kubernetes.io/master", "");
pub(super) const I: (&str, &str) = ("node-role.kubernetes.io/infra", "");
pub(super) const G: (&str, &str) = ("node-role.kubernetes.io/gpu", "");
pub(super) const WINDOWS: (&str, &str) = ("kubernetes.io/os", "windows");
pub(super) const LINUX: (&str, &str) = ("kubernetes.io/os", "linux");

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
            release: ClusterRelease::given(REL_4_20),
            ..Default::default()
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
