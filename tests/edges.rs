//! Edges of availability, the finalizer controller and uninstall, end to end on a real API
//! server (issue 10): what happens when the guard's own access, its watches or its process
//! lifetime go wrong, and when the uninstall command meets objects it may not touch.
//!
//! Each test starts its own control plane (and guard, where one is needed) and stops them.

mod support;

use std::process::Command;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use support::controlplane::ControlPlane;
use support::mco;
use support::scenario::create_mosc;

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

fn finalizers_of(obj: &kube::api::DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

/// `mosc-guard ARGS --kubeconfig KUBECONFIG`: (exit code, stdout, stderr).
fn run_as(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mosc-guard"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run mosc-guard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Item 5: a 403 on one MachineOSConfig does not abort the run. The user may read everything
/// but patch only `alpha` and `gamma`; `beta` (listed between them) is refused. The others are
/// released, the summary names `beta` and why, and the exit status says the run is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_finalizers_goes_on_past_a_forbidden_object_and_names_it() {
    let cp = ControlPlane::start().await.expect("control plane");
    for name in ["alpha", "beta", "gamma"] {
        mosc_with_finalizer(&cp, name).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = support::users::kubeconfig(&cp, "releaser", dir.path()).expect("kubeconfig");
    support::users::apply(
        &cp,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: releaser}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds, machineconfigpools]
  verbs: [get, list]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs]
  resourceNames: [alpha, gamma]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: releaser}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: releaser}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: releaser}
"#,
    )
    .await
    .expect("RBAC");
    // RBAC takes effect through the API server's informer: wait until it lets the user patch.
    support::scenario::wait_for(
        || async {
            let out = cp
                .kubectl([
                    "auth",
                    "can-i",
                    "patch",
                    "machineosconfigs/gamma",
                    "--as",
                    "releaser",
                ])
                .await?;
            Ok(out.success().then_some(()))
        },
        std::time::Duration::from_secs(30),
        "RBAC for the releaser",
    )
    .await
    .expect("RBAC in effect");

    let (code, stdout, stderr) = run_as(&kubeconfig, &["release-finalizers"]);
    assert_eq!(code, 2, "an object could not be released: {stdout}{stderr}");
    assert!(
        stdout.contains("released machineosconfig/alpha"),
        "{stdout}"
    );
    assert!(
        stdout.contains("released machineosconfig/gamma"),
        "the run went on after beta: {stdout}{stderr}"
    );
    let beta_line = stdout
        .lines()
        .find(|l| l.starts_with("could not release machineosconfig/beta: "))
        .unwrap_or_else(|| panic!("beta named with the reason: {stdout}{stderr}"));
    assert!(beta_line.contains("forbidden"), "{beta_line}");
    assert!(
        stderr.contains("could not release 1 MachineOSConfig(s): beta"),
        "{stderr}"
    );

    let moscs = mco::list_all(&mco::moscs(&cp.client()))
        .await
        .expect("list");
    let held: Vec<&str> = moscs
        .iter()
        .filter(|m| finalizers_of(m).iter().any(|f| f == FINALIZER))
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert_eq!(held, ["beta"], "only the forbidden one keeps the finalizer");
}
