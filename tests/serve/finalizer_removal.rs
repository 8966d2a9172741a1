//! Removing mosc-guard's finalizer, end to end on a real API server: the uninstall command
//! (`mosc-guard remove-finalizers`) meeting an object it may not touch, and the finalizer's
//! removal from the largest MachineOSConfig the API server stores, decided by the webhook rather
//! than refused for its size.
//!
//! Each test starts its own control plane (and guard, where one is needed) and stops them.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use testkit::cli::CliRun;
use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco;
use testkit::scenario::{create_mosc, finalizers, wait_gone};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// Creates MachineOSConfig `name` carrying mosc-guard's finalizer (as defer mode leaves it).
async fn mosc_with_finalizer(cp: &ControlPlane, name: &str) {
    create_mosc(&cp.client(), name, "registry.example:5000/ocb-image:latest")
        .await
        .expect("create MachineOSConfig");
    mco::moscs(&cp.client())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}})),
        )
        .await
        .expect("add the finalizer");
}

/// A 403 on one MachineOSConfig does not abort the run. The user may read everything
/// but patch only `alpha` and `gamma`; `beta` (listed between them) is refused. The others are
/// let go, the summary names `beta` and why, and the exit status says the run is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_finalizers_goes_on_past_a_forbidden_object_and_names_it() {
    let cp = ControlPlane::start().await.expect("control plane");
    for name in ["alpha", "beta", "gamma"] {
        mosc_with_finalizer(&cp, name).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        testkit::users::kubeconfig(&cp, "uninstaller", dir.path()).expect("kubeconfig");
    testkit::users::apply(
        &cp,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: uninstaller}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds, machineconfigpools]
  verbs: [get, list]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [config.openshift.io]
  resources: [clusterversions]
  verbs: [list]
- apiGroups: [machine.openshift.io]
  resources: [machines]
  verbs: [list]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs]
  resourceNames: [alpha, gamma]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: uninstaller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: uninstaller}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: uninstaller}
"#,
    )
    .await
    .expect("RBAC");
    // RBAC takes effect through the API server's informer: wait until it lets the user patch.
    testkit::users::wait_can_i(&cp, "patch", "machineosconfigs/gamma", "uninstaller", true)
        .await
        .expect("RBAC in effect");

    let CliRun {
        code,
        stdout,
        stderr,
    } = BIN
        .cli()
        .arg("remove-finalizers")
        .kubeconfig(&kubeconfig)
        .run();
    assert_eq!(
        code,
        Some(2),
        "an object's finalizer could not be removed: {stdout}{stderr}"
    );
    assert!(
        stdout.contains("removed the finalizer from machineosconfig/alpha"),
        "{stdout}"
    );
    assert!(
        stdout.contains("removed the finalizer from machineosconfig/gamma"),
        "the run went on after beta: {stdout}{stderr}"
    );
    let beta_line = stdout
        .lines()
        .find(|l| l.starts_with("could not remove the finalizer from machineosconfig/beta: "))
        .unwrap_or_else(|| panic!("beta named with the reason: {stdout}{stderr}"));
    assert!(beta_line.contains("forbidden"), "{beta_line}");
    assert!(
        stderr.contains("could not remove the finalizer from 1 MachineOSConfig(s): beta"),
        "{stderr}"
    );

    let moscs = mco::list_all(&mco::moscs(&cp.client()))
        .await
        .expect("list");
    let held: Vec<&str> = moscs
        .iter()
        .filter(|m| finalizers(m).iter().any(|f| f == FINALIZER))
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert_eq!(held, ["beta"], "only the forbidden one keeps the finalizer");
}

/// A MachineOSConfig `name` as an admin writes it, optionally carrying mosc-guard's finalizer.
fn small_mosc(name: &str, finalizer: bool) -> kube::api::DynamicObject {
    let mut mosc = kube::api::DynamicObject::new(name, &mco::mosc_resource()).data(json!({
        "spec": {
            "machineConfigPool": {"name": name},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": "registry.example:5000/ocb-image:latest",
            "containerFile": [{"containerfileArch": "NoArch",
                               "content": "FROM configs AS final\nRUN dnf install -y cowsay\n"}],
        }
    }));
    if finalizer {
        mosc.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    }
    mosc
}

/// Grows MOSC `name` to about `bytes` of status: the 4.20 contract caps a containerfile at
/// 4 KiB (4 of them) and a condition message at 32 KiB, but not the number of conditions, so
/// conditions are where a MachineOSConfig can be large.
async fn grow_status(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    bytes: usize,
) -> Result<kube::api::DynamicObject, kube::Error> {
    const MESSAGE: usize = 32 * 1024;
    let line = "RUN dnf install -y cowsay && dnf clean all && echo done > /etc/motd\n";
    let conditions: Vec<serde_json::Value> = (0..bytes.div_ceil(MESSAGE))
        .map(|i| {
            let len = MESSAGE.min(bytes - i * MESSAGE);
            json!({"type": format!("BuildLog{i}"), "status": "True", "reason": "Logged",
                   "message": line.chars().cycle().take(len).collect::<String>(),
                   "lastTransitionTime": "2026-11-30T10:00:00Z"})
        })
        .collect();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await
}

/// The removal of the finalizer from the largest MachineOSConfig the API server
/// accepts is decided, not refused for its size. That UPDATE's review carries the object and
/// its oldObject (about twice the object's size), which exceeded the old 3 MiB body limit: the
/// webhook call failed and, with failurePolicy Fail, the removal was refused.
///
/// etcd runs with a 3 MiB request limit (clusters raise etcd's 1.5 MiB default), so the bound
/// is the API server's own: its etcd client sends at most 2 MiB per request (found by search).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_mosc_can_have_its_finalizer_removed() {
    let cp = ControlPlane::start_with_etcd_args(&["--max-request-bytes=3145728"])
        .await
        .expect("control plane");
    let api = mco::moscs(&cp.client());
    api.create(&kube::api::PostParams::default(), &small_mosc("big", true))
        .await
        .expect("create MachineOSConfig big");
    // Find the largest status the API server stores (to 16 KiB), before any webhook.
    let (mut ok, mut too_big) = (64 * 1024, 4 * 1024 * 1024);
    while too_big - ok > 16 * 1024 {
        let size = (ok + too_big) / 2;
        match grow_status(&api, "big", size).await {
            Ok(_) => ok = size,
            Err(e) => {
                tracing::info!("a {size}-byte status is refused: {e}");
                too_big = size;
            }
        }
    }
    grow_status(&api, "big", ok)
        .await
        .expect("the largest accepted status again");
    // Its size as the API server encodes it (Go's encoding/json writes '<', '>' and '&' as
    // six-byte escapes), which is what etcd limits and what a review carries.
    let json = serde_json::to_vec(&api.get("big").await.expect("get big")).expect("encode");
    let escapes = json
        .iter()
        .filter(|b| matches!(b, b'<' | b'>' | b'&'))
        .count();
    let stored = json.len() + 5 * escapes;
    tracing::info!("largest MachineOSConfig: {stored} bytes as the API server encodes it");
    assert!(
        2 * stored > 3 * 1024 * 1024,
        "two copies ({stored} bytes each) exceed the old limit, or this test proves nothing"
    );

    let guard = BIN.serve(&cp).start().await.expect("guard");
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    // Deleting it is allowed (it never built: no images), and the finalizer holds it.
    api.delete("big", &Default::default())
        .await
        .expect("delete is admitted");
    // Removing the finalizer from the object being deleted goes to the webhook as an UPDATE.
    let current = api.get("big").await.expect("get big");
    assert!(current.metadata.deletion_timestamp.is_some());
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]))
    .expect("patch");
    api.patch("big", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap_or_else(|e| panic!("the removal is decided, not refused for its size: {e}"));
    wait_gone(&api, "big", Duration::from_secs(30))
        .await
        .expect("the large MachineOSConfig deleted");
    let log = guard.log_tail(400);
    assert!(
        log.lines().any(|l| l.contains("admission decision")
            && l.contains("name=big")
            && l.contains("result=allowed")),
        "the guard decided the removal:\n{log}"
    );
}
