//! Table tests of the recovery plan over small hand-built clusters: the fixtures here (the node
//! the report's bug leaves behind, and edits of it), the tests by topic in the files below.

mod idempotence;
mod loss;
mod patch;
mod pools;
mod rules;
mod seen;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::core::model::LABEL_MACHINE_OS_CONFIG;
use crate::core::model::node_annotations::{
    CONTROL_PLANE_TOPOLOGY, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN,
    DESIRED_IMAGE, LAST_APPLIED_DRAIN, REASON, STATE,
};
use crate::core::registry::{Answer, Status};

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";
const LOST: &str = "01971adebd63c4e0f2a7b5d8193e6f4a2c0b7d9e8f1a3c5b7d9e0f2a4c6b8d0e";
const RAN: &str = "0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const NODE: &str = "ip-10-0-11-240.us-east-2.compute.internal";
const NEW_CONFIG: &str = "rendered-worker-5f1c3c0e0f0e4d2a";
const OLD_CONFIG: &str = "rendered-worker-0c7e9a1b2d3f4e5a";
const BOOT: &str = "6f3a2c1e-0b9d-4e7f-8a6c-5d4e3f2a1b0c";
const REASON_TEXT: &str = "error running rpm-ostree rebase --experimental \
    ostree-unverified-registry:...: reading manifest sha256:... in ...: manifest unknown";

fn img(hex: &str) -> String {
    format!("{REPO}@sha256:{hex}")
}

/// The node the report's bug leaves behind: `Degraded`, `desiredImage` the lost image,
/// `currentImage` the image it ran, drained and cordoned for the new config.
fn stuck(name: &str, role: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "resourceVersion": "4711",
            "labels": {format!("node-role.kubernetes.io/{role}"): "", "kubernetes.io/os": "linux"},
            "annotations": {
                STATE: "Degraded", REASON: REASON_TEXT,
                DESIRED_IMAGE: img(LOST), CURRENT_IMAGE: img(RAN),
                DESIRED_CONFIG: NEW_CONFIG, CURRENT_CONFIG: OLD_CONFIG,
                DESIRED_DRAIN: format!("drain-{NEW_CONFIG}"),
                LAST_APPLIED_DRAIN: format!("drain-{NEW_CONFIG}"),
                CONTROL_PLANE_TOPOLOGY: "HighlyAvailable",
                "k8s.ovn.org/node-subnets": "{\"default\":[\"10.128.2.0/23\"]}"
            }
        },
        "spec": {"unschedulable": true},
        "status": {"nodeInfo": {"bootID": BOOT}}
    })
}

/// Sets (or with `None` removes) an annotation of a node fixture.
fn annotate(node: &mut Value, key: &str, value: Option<&str>) {
    let annotations = node["metadata"]["annotations"]
        .as_object_mut()
        .expect("annotations");
    match value {
        Some(v) => annotations.insert(key.to_string(), json!(v)),
        None => annotations.remove(key),
    };
}

fn mosc(name: &str) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"machineConfigPool": {"name": name}}})
}

fn mosb(name: &str, mosc: &str, image: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {LABEL_MACHINE_OS_CONFIG: mosc}},
        "spec": {"machineOSConfig": {"name": mosc}},
        "status": {"digestedImagePushSpec": image}})
}

fn pool(name: &str, paused: bool) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
        "paused": paused}})
}

fn arcs<T: serde::de::DeserializeOwned>(items: &[Value]) -> Vec<Arc<T>> {
    items
        .iter()
        .map(|v| Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes")))
        .collect()
}

/// A cluster to plan over: the objects as JSON, edited by each test.
#[derive(Clone)]
struct Cluster {
    nodes: Vec<Value>,
    moscs: Vec<Value>,
    mosbs: Vec<Value>,
    pools: Vec<Value>,
    machine_configs: Option<Vec<String>>,
    disagreeing: Vec<String>,
    /// What the registry says of the images asked.
    registry: RegistryAnswers,
}

impl Cluster {
    /// After the report's bug: the worker MOSC and its builds are gone, one node stuck.
    fn report() -> Cluster {
        Cluster {
            nodes: vec![stuck(NODE, "worker")],
            moscs: Vec::new(),
            mosbs: Vec::new(),
            pools: vec![
                pool("master", false),
                pool("worker", false),
                pool("infra", false),
            ],
            machine_configs: Some(
                [
                    NEW_CONFIG,
                    OLD_CONFIG,
                    "rendered-master-1a2b",
                    "rendered-infra-3c4d",
                ]
                .map(str::to_string)
                .to_vec(),
            ),
            disagreeing: Vec::new(),
            registry: RegistryAnswers {
                answers: [(img(LOST), answer(Status::Missing))].into(),
                ..RegistryAnswers::default()
            },
        }
    }

    /// The registry now says `status` of `image`.
    fn registry_says(&mut self, image: &str, status: Status) {
        self.registry
            .answers
            .insert(image.to_string(), answer(status));
    }

    fn snapshot(&self) -> RecoverySnapshot {
        RecoverySnapshot {
            objects: Snapshot {
                machine_os_configs: arcs(&self.moscs),
                machine_os_builds: arcs(&self.mosbs),
                pools: arcs(&self.pools),
                ..Default::default()
            },
            nodes: self
                .nodes
                .iter()
                .map(|n| serde_json::from_value(n.clone()).expect("node decodes"))
                .collect(),
            machine_configs: self
                .machine_configs
                .as_ref()
                .map(|m| m.iter().cloned().collect::<BTreeSet<_>>()),
            disagreeing: self.disagreeing.iter().cloned().collect(),
        }
    }

    fn plan(&self, pool: Option<&str>) -> Plan {
        plan(&self.snapshot(), pool, &self.registry)
    }

    /// The one node's verdict (panics unless the plan lists exactly that node).
    fn diagnosis_of(&self, node: &str) -> Diagnosis {
        let plan = self.plan(None);
        let found: Vec<&NodePlan> = plan.nodes.iter().filter(|n| n.node == node).collect();
        assert_eq!(found.len(), 1, "{node} listed once in {plan:#?}");
        found[0].diagnosis.clone()
    }
}

/// A registry's answer with `status`, its reason naming the status.
fn answer(status: Status) -> Answer {
    Answer {
        status,
        why: format!("{REPO}@sha256:...: the registry answered {status}"),
    }
}

/// The problems' codes, or the verdict's kind for the others.
fn summary(v: &Diagnosis) -> Vec<&'static str> {
    match v {
        Diagnosis::Recoverable(_) => vec!["recoverable"],
        Diagnosis::Cancelled { .. } => vec!["cancelled"],
        Diagnosis::NeedsAttention(problems) => problems.iter().map(words::problem_code).collect(),
        Diagnosis::OutOfScope(Scope::Unreconcilable) => vec!["outOfScope:unreconcilable"],
        Diagnosis::OutOfScope(Scope::NoImageDifference { .. }) => {
            vec!["outOfScope:noImageDifference"]
        }
        Diagnosis::OutOfScope(Scope::StillTrying { .. }) => vec!["outOfScope:stillTrying"],
        Diagnosis::OutOfScope(Scope::NoPool) => vec!["outOfScope:noPool"],
    }
}

/// The node JSON after the plan's patch, applied as RFC 6902 says (the real API server's
/// behaviour is tested in tests/recover).
fn patched(node: &Value, patch: &NodePatch) -> Result<Value, String> {
    let ops: json_patch::Patch =
        serde_json::from_value(Value::Array(patch.ops.clone())).map_err(|e| e.to_string())?;
    let mut doc = node.clone();
    json_patch::patch(&mut doc, &ops).map_err(|e| e.to_string())?;
    Ok(doc)
}

fn recovery(v: &Diagnosis) -> &Recovery {
    match v {
        Diagnosis::Recoverable(r) => r,
        other => panic!("not recoverable: {other:#?}"),
    }
}
