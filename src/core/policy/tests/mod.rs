//! Table-driven tests of the policy over small hand-built clusters: the fixtures here, the
//! tests by topic in the files below.

mod index;
mod mco;
mod messages;
mod pool_rule;
mod table;

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::core::message;
use crate::core::model::{LABEL_MACHINE_OS_CONFIG, OVERRIDE_ANNOTATION, node_annotations};
pub(super) use crate::core::release::ClusterRelease;
use crate::core::snapshot::Snapshot;

pub(super) const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";
pub(super) const NEW: &str = "01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub(super) const OLD: &str = "0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
pub(super) const INFRA: &str = "0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
pub(super) const NODE: &str = "ip-10-0-11-240.us-east-2.compute.internal";

pub(super) fn img(hex: &str) -> String {
    format!("{REPO}@sha256:{hex}")
}

pub(super) fn mosc(name: &str, current: Option<&str>) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"machineConfigPool": {"name": name}, "renderedImagePushSpec": format!("{REPO}:latest")},
        "status": {"currentImagePullSpec": current.map(img), "machineOSBuild": current.map(|_| json!({"name": format!("{name}-{}", &NEW[..6])}))}
    })
}

/// A config that built before (MCO's current-build annotation) but has no builds left.
pub(super) fn mosc_builds_gone(name: &str) -> Value {
    let mut v = mosc(name, None);
    v["metadata"]["annotations"] = json!({"machineconfiguration.openshift.io/current-machine-os-build": format!("{name}-old")});
    v
}

pub(super) fn mosb(name: &str, mosc: &str, hex: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {LABEL_MACHINE_OS_CONFIG: mosc}},
        "spec": {"machineOSConfig": {"name": mosc}},
        "status": {"digestedImagePushSpec": img(hex)}
    })
}

pub(super) fn pool(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}}})
}

/// A node with the given roles and (desired, current, state) annotations.
pub(super) fn node(
    name: &str,
    roles: &[&str],
    desired: Option<&str>,
    current: Option<&str>,
    state: &str,
) -> Value {
    let labels: serde_json::Map<String, Value> = roles
        .iter()
        .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
        .collect();
    let mut ann = serde_json::Map::new();
    ann.insert(node_annotations::STATE.into(), json!(state));
    if let Some(d) = desired {
        ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = current {
        ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    json!({"metadata": {"name": name, "labels": labels, "annotations": ann}})
}

pub(super) fn arcs<T: serde::de::DeserializeOwned>(items: &[Value]) -> Vec<Arc<T>> {
    items
        .iter()
        .map(|v| Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes")))
        .collect()
}

pub(super) struct Cluster {
    pub(super) moscs: Vec<Value>,
    pub(super) mosbs: Vec<Value>,
    pub(super) nodes: Vec<Value>,
}

impl Cluster {
    /// The report's scenario: worker MOSC built, first node rolling to the new image.
    pub(super) fn report() -> Cluster {
        Cluster {
            moscs: vec![mosc("worker", Some(NEW))],
            mosbs: vec![mosb("worker-8f2a1c", "worker", NEW)],
            nodes: vec![
                node(NODE, &["worker"], Some(&img(NEW)), None, "Working"),
                node("worker-b", &["worker"], None, None, "Done"),
            ],
        }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: arcs(&self.moscs),
            machine_os_builds: arcs(&self.mosbs),
            pools: arcs(&[pool("worker"), pool("infra")]),
            nodes: arcs(&self.nodes),
            release: ClusterRelease::given("4.20.8"),
            ..Default::default()
        }
    }
}

pub(super) fn decide(c: &Cluster, target: &str, mode: PolicyMode) -> Verdict {
    let snap = c.snapshot();
    if let Some(mosb) = snap.machine_os_build(target) {
        return evaluate(&snap, Deletion::MachineOSBuild(mosb), mode);
    }
    let mosc = snap.machine_os_config(target).expect("target in fixture");
    evaluate(&snap, Deletion::MachineOSConfig(mosc), mode)
}

pub(super) fn blocking_names(v: &Verdict) -> Vec<&str> {
    v.blocking.iter().map(|b| b.node.as_str()).collect()
}
