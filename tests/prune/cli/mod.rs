//! `mosc-guard prune` end to end: the real binary over dumps written here ([`dumps`]: the plan as
//! text and JSON, what it refuses to do), and against a real kube-apiserver with the guard
//! registered in front ([`live`]: the plan writes nothing; `--apply` deletes the deletable builds
//! one at a time and stops where it must: a build that became needed, a delete the guard
//! refuses, preconditions that fail (made to happen by [`interpose`]), a build that does not go,
//! Ctrl-C); and `serve`'s gauge of deletable builds ([`gauge`]). What MCO then does with the
//! images is the simulator's: tests/prune/rollouts.
//!
//! Contract: exit 0 when the plan was made (with `--apply`: and carried out), 1 when something
//! could not be done, 2 when the input cannot be read (nothing on stdout then), 130 on Ctrl-C;
//! `--output json` prints one object on stdout.

mod dumps;
mod gauge;
mod interpose;
mod live;

use serde_json::{Value, json};
use testkit::cli::CliRun;
use testkit::guard::GuardBin;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";
const LABEL_MOSC: &str = "machineconfiguration.openshift.io/machine-os-config";
const LABEL_POOL: &str = "machineconfiguration.openshift.io/target-machine-config-pool";

/// Image `n` (a digest made of its number).
fn image(n: u8) -> String {
    format!("{REPO}@sha256:{}", format!("{n:02x}").repeat(32))
}

fn rendered(n: u8) -> String {
    format!("rendered-worker-{}", format!("{n:x}").repeat(32))
}

/// Build `n` of MachineOSConfig worker, for rendered config `n`.
fn build_name(n: u8) -> String {
    format!("worker-{}", format!("{n:x}").repeat(32))
}

/// Build `n` as MCO writes it (labels, finalizer, a controller reference to the config with
/// `config_uid`, the spec), succeeded with image `n`; created at `created` when given (a dump),
/// else by the API server.
fn build(n: u8, created: Option<&str>, config_uid: &str) -> Value {
    let name = build_name(n);
    let mut metadata = json!({
        "name": name,
        "labels": {LABEL_MOSC: "worker", LABEL_POOL: "worker",
                   "machineconfiguration.openshift.io/rendered-machine-config": rendered(n)},
        "annotations": {"machineconfiguration.openshift.io/rendered-image-push-secret": "push-secret"},
        "finalizers": ["foregroundDeletion"],
        "ownerReferences": [{"apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig", "name": "worker", "uid": config_uid,
            "controller": true, "blockOwnerDeletion": true}]
    });
    if let Some(c) = created {
        metadata["creationTimestamp"] = json!(c);
        metadata["uid"] = json!(format!("uid-{name}"));
        metadata["resourceVersion"] = json!(format!("{}", 1000 + u32::from(n)));
    }
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": metadata,
        "spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": rendered(n)},
                 "renderedImagePushSpec": format!("{REPO}:{name}")},
        "status": succeeded(n)
    })
}

/// A succeeded build's status with image `n`, as a real API server accepts it.
fn succeeded(n: u8) -> Value {
    let at = "2025-06-01T00:00:00Z";
    let condition = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "Ready", "message": "", "lastTransitionTime": at});
    json!({
        "digestedImagePushSpec": image(n),
        "buildStart": at, "buildEnd": "2025-06-01T00:05:00Z",
        "conditions": [condition("Prepared", "False"), condition("Building", "False"),
                       condition("Succeeded", "True"), condition("Failed", "False"),
                       condition("Interrupted", "False")]
    })
}

/// MachineOSConfig worker (uid `uid` in a dump), its current build and image `current`.
fn mosc(current: u8, uid: Option<&str>) -> Value {
    let mut v = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": "worker",
            "annotations": {"machineconfiguration.openshift.io/current-machine-os-build": build_name(current)}},
        "spec": {"machineConfigPool": {"name": "worker"},
                 "imageBuilder": {"imageBuilderType": "Job"},
                 "renderedImagePushSecret": {"name": "push-secret"},
                 "renderedImagePushSpec": format!("{REPO}:latest")},
        "status": {"currentImagePullSpec": image(current)}
    });
    if let Some(uid) = uid {
        v["metadata"]["uid"] = json!(uid);
    }
    v
}

/// Pool worker on rendered config `status`, targeting `spec`.
fn pool(spec: u8, status: u8) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                 "configuration": {"name": rendered(spec)}},
        "status": {"configuration": {"name": rendered(status)}}
    })
}

/// A worker node that wants image `desired` and runs `current`.
fn node(name: &str, desired: u8, current: u8) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/os": "linux"},
            "annotations": {"machineconfiguration.openshift.io/desiredImage": image(desired),
                            "machineconfiguration.openshift.io/currentImage": image(current),
                            "machineconfiguration.openshift.io/state": "Done"}}
    })
}

/// The builds listed under `key` of a JSON report.
fn builds_in(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is an array: {report:#}"))
        .iter()
        .map(|b| b["build"].as_str().expect("build").to_string())
        .collect()
}

fn names(ns: &[u8]) -> Vec<String> {
    ns.iter().map(|&n| build_name(n)).collect()
}
