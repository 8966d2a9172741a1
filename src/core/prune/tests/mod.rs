//! Table tests of the prune plan over small hand-built clusters: the fixtures here (a `worker`
//! pool that went through rendered configs R1, R2, ... each with its build), the tests by topic
//! below. Every test also checks the plan against the webhook ([`agrees`]).

mod images;
mod keep;
mod mco;
mod output;
mod per_config;
mod recheck;

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::*;
use crate::core::model::{LABEL_MACHINE_OS_CONFIG, LABEL_TARGET_POOL, node_annotations};
use crate::core::release::ClusterRelease;

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

/// The time every plan is made at.
fn now() -> Timestamp {
    "2026-09-01T12:00:00Z".parse().expect("timestamp")
}

/// `minutes` before [`now`], as the API server writes it.
fn ago(minutes: i64) -> String {
    (now() - SignedDuration::from_mins(minutes)).to_string()
}

/// The image of build `n` (a digest made of its number).
fn img(n: u8) -> String {
    format!("{REPO}@sha256:{}", format!("{n:02x}").repeat(32))
}

fn rendered(n: u8) -> String {
    format!("rendered-worker-{}", format!("{n:x}").repeat(32))
}

/// The build of rendered config `n` of MachineOSConfig `worker`, as MCO writes it: succeeded
/// with image `n`, created `minutes` ago, controlled by the config.
fn build(n: u8, minutes: i64) -> Value {
    let name = name(n);
    json!({
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "resourceVersion": "7",
            "creationTimestamp": ago(minutes),
            "labels": {LABEL_MACHINE_OS_CONFIG: "worker", LABEL_TARGET_POOL: "worker",
                       "machineconfiguration.openshift.io/rendered-machine-config": rendered(n)},
            "ownerReferences": [{"apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineOSConfig", "name": "worker", "uid": "uid-worker", "controller": true}]
        },
        "spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": rendered(n)},
                 "renderedImagePushSpec": format!("{REPO}:{name}")},
        "status": {"digestedImagePushSpec": img(n),
                   "conditions": [{"type": "Succeeded", "status": "True"}]}
    })
}

fn name(n: u8) -> String {
    format!("worker-{}", format!("{n:x}").repeat(32))
}

/// [`build`] `n` failed (no image).
fn failed(n: u8, minutes: i64) -> Value {
    let mut b = build(n, minutes);
    b["status"] = json!({"conditions": [{"type": "Succeeded", "status": "False"},
                                         {"type": "Failed", "status": "True"}]});
    b
}

/// MachineOSConfig `worker`, its current build `n` (annotation) and image `n`.
fn mosc(current: u8) -> Value {
    json!({
        "metadata": {"name": "worker", "uid": "uid-worker",
                     "annotations": {"machineconfiguration.openshift.io/current-machine-os-build": name(current)}},
        "spec": {"machineConfigPool": {"name": "worker"}, "renderedImagePushSpec": format!("{REPO}:latest")},
        "status": {"currentImagePullSpec": img(current)}
    })
}

/// Pool `worker` targeting rendered config `spec`, its nodes on `status`.
fn pool(spec: u8, status: u8) -> Value {
    json!({
        "metadata": {"name": "worker"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                 "configuration": {"name": rendered(spec)}},
        "status": {"configuration": {"name": rendered(status)}, "machineCount": 2, "updatedMachineCount": 2}
    })
}

/// A node of `role` with (desired, current) images.
fn node(name: &str, role: &str, desired: Option<&str>, current: Option<&str>) -> Value {
    let mut ann = serde_json::Map::new();
    ann.insert(node_annotations::STATE.into(), json!("Done"));
    if let Some(d) = desired {
        ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = current {
        ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    json!({"metadata": {"name": name,
        "labels": {format!("node-role.kubernetes.io/{role}"): ""}, "annotations": ann}})
}

/// A worker node settled on image `n`.
fn on(name: &str, n: u8) -> Value {
    node(name, "worker", Some(&img(n)), Some(&img(n)))
}

fn arcs<T: serde::de::DeserializeOwned>(items: &[Value]) -> Vec<Arc<T>> {
    items
        .iter()
        .map(|v| Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes")))
        .collect()
}

struct Cluster {
    moscs: Vec<Value>,
    builds: Vec<Value>,
    pools: Vec<Value>,
    nodes: Vec<Value>,
    release: &'static str,
}

impl Cluster {
    /// Pool worker through rendered configs 1 to `n`, a build each a day apart (the last a day
    /// old), settled on the last: both nodes run it.
    fn settled(n: u8) -> Cluster {
        Cluster {
            moscs: vec![mosc(n)],
            builds: (1..=n)
                .map(|i| build(i, 24 * 60 * i64::from(n - i + 1)))
                .collect(),
            pools: vec![pool(n, n)],
            nodes: vec![on("worker-a", n), on("worker-b", n)],
            release: "4.20.8",
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: arcs(&self.moscs),
            machine_os_builds: arcs(&self.builds),
            pools: arcs(&self.pools),
            nodes: arcs(&self.nodes),
            release: ClusterRelease::given(self.release),
            ..Default::default()
        }
    }

    fn plan(&self, options: Options) -> Plan {
        let snapshot = self.snapshot();
        let plan = plan(&snapshot, &options, now());
        agrees(&snapshot, &plan);
        without_nodes_unless_read(&snapshot, &options, &plan);
        plan
    }

    fn build_mut(&mut self, n: u8) -> &mut Value {
        let wanted = name(n);
        self.builds
            .iter_mut()
            .find(|b| b["metadata"]["name"] == wanted.as_str())
            .expect("build in fixture")
    }
}

fn defaults() -> Options {
    Options::default()
}

fn keep(n: usize) -> Options {
    Options {
        keep: n,
        keep_younger_than: std::time::Duration::ZERO,
    }
}

/// The deletable builds' numbers (by name).
fn deletable(plan: &Plan) -> Vec<String> {
    plan.deletable().map(|b| b.name.clone()).collect()
}

/// The reasons build `n` is kept.
fn reasons(plan: &Plan, n: u8) -> Vec<Keep> {
    plan.build(&name(n))
        .unwrap_or_else(|| panic!("build {n} planned"))
        .reasons()
}

fn names(ns: &[u8]) -> Vec<String> {
    ns.iter().map(|&n| name(n)).collect()
}

/// `serve`'s gauge plans without the nodes unless [`reads_every_node`] says the plan reads
/// them: the plan must then be the same.
fn without_nodes_unless_read(snapshot: &Snapshot, options: &Options, plan: &Plan) {
    if reads_every_node(snapshot) {
        return;
    }
    let bare = Snapshot {
        nodes: Vec::new(),
        ..snapshot.clone()
    };
    let without = plan_with(&bare, options, now(), |build| {
        policy::evaluate(snapshot, Deletion::MachineOSBuild(build), PolicyMode::InUse)
    });
    assert_eq!(
        &without, plan,
        "a plan without the nodes differs, yet reads_every_node is false"
    );
}

/// One engine, many front ends: the webhook never refuses a build the plan calls deletable, in
/// either policy mode, the override aside; and no deletable build's images are a kept build's,
/// a node's or a config's current image.
fn agrees(snapshot: &Snapshot, plan: &Plan) {
    for planned in plan.deletable() {
        let build = snapshot
            .machine_os_build(&planned.name)
            .expect("planned build in snapshot");
        for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
            let v = policy::evaluate(snapshot, Deletion::MachineOSBuild(build), mode);
            assert!(
                !v.blocked(),
                "{}: deletable, but the policy ({mode}) refuses it: {v:?}",
                planned.name
            );
        }
        for image in &planned.deletes {
            let key = crate::core::image::ImageKey::parse(image);
            for kept in plan.kept() {
                for theirs in kept.image.iter().chain(&kept.deletes) {
                    assert_ne!(
                        crate::core::image::ImageKey::parse(theirs),
                        key,
                        "{} deletes {image}, which kept {} carries",
                        planned.name,
                        kept.name
                    );
                }
            }
            for config in &snapshot.machine_os_configs {
                assert!(
                    !config
                        .current_image()
                        .is_some_and(|c| crate::core::image::same_image(c, image)),
                    "{} deletes {}'s current image",
                    planned.name,
                    config.name()
                );
            }
        }
    }
}
