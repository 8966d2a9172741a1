//! Kubeconfigs for users other than the admin, authenticated with client certificates from the
//! control plane's CA, so a test can give them exactly the RBAC it wants (and take it away).

pub mod mob;

use std::path::{Path, PathBuf};

use crate::Result;
use crate::controlplane::ControlPlane;

/// Writes `<dir>/<user>.kubeconfig` for user `user` (no groups beyond `system:authenticated`)
/// against the control plane; returns its path.
pub fn kubeconfig(cp: &ControlPlane, user: &str, dir: &Path) -> Result<PathBuf> {
    kubeconfig_via(cp, user, dir, cp.server())
}

/// Like [`kubeconfig`], reaching the API server at `server` (e.g. a forwarder in front of it;
/// its certificate names 127.0.0.1, so any local port verifies).
pub fn kubeconfig_via(cp: &ControlPlane, user: &str, dir: &Path, server: &str) -> Result<PathBuf> {
    kubeconfig_with_groups(cp, user, &[], dir, server)
}

/// Like [`kubeconfig_via`], for a cluster admin (group `system:masters`): the guard's own
/// access, rerouted (e.g. through a forwarder a chaos test can cut).
pub fn admin_kubeconfig_via(cp: &ControlPlane, dir: &Path, server: &str) -> Result<PathBuf> {
    kubeconfig_with_groups(cp, "e2e-admin-rerouted", &["system:masters"], dir, server)
}

/// Writes `<dir>/<user>.kubeconfig` for user `user` in `groups` (e.g. a kubelet's
/// `system:node:<name>` in `system:nodes`) reaching the API server at `server`; returns its path.
pub fn kubeconfig_with_groups(
    cp: &ControlPlane,
    user: &str,
    groups: &[&str],
    dir: &Path,
    server: &str,
) -> Result<PathBuf> {
    let cert = cp.pki().client_cert(user, groups)?;
    let path = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
             users:\n- name: {user}\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
             contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: {user}\n\
             current-context: e2e\n",
            server = server,
            ca = cp.pki().ca_path().display(),
            cert = cert.cert.display(),
            key = cert.key.display(),
        ),
    )?;
    Ok(path)
}

/// Applies `yaml` (RBAC objects, ...) as the admin; errs with kubectl's output on failure.
pub async fn apply(cp: &ControlPlane, yaml: &str) -> Result<()> {
    let out = cp
        .kubectl_with_stdin(["apply", "-f", "-"], Some(yaml))
        .await?;
    if out.success() {
        Ok(())
    } else {
        Err(format!("kubectl apply: {out:?}").into())
    }
}

/// Waits until `kubectl auth can-i VERB RESOURCE --as USER` answers `allowed` (RBAC takes effect
/// through the API server's informer, a moment after it is written).
pub async fn wait_can_i(
    cp: &ControlPlane,
    verb: &str,
    resource: &str,
    user: &str,
    allowed: bool,
) -> Result<()> {
    crate::poll::wait_for(
        || async {
            let out = cp
                .kubectl(["auth", "can-i", verb, resource, "--as", user])
                .await?;
            Ok((out.success() == allowed).then_some(()))
        },
        std::time::Duration::from_secs(30),
        &format!("`can-i {verb} {resource} --as {user}` to answer {allowed}"),
    )
    .await
}

/// The RBAC a deny-mode guard running as user `user` needs, and nothing more: read nodes, the
/// three MCO kinds, the ClusterVersion and (4.21 on, joining machines) Machines in every
/// namespace; patch MachineOSConfigs (only to remove a leftover defer-mode finalizer); record
/// its Events (about cluster-scoped objects, so in `default`). The same grants as
/// `manifests/base/rbac.yaml`, bound to a User.
pub fn guard_rbac(user: &str) -> String {
    format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {user}-reader}}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds, machineconfigpools]
  verbs: [get, list, watch]
- apiGroups: [config.openshift.io]
  resources: [clusterversions]
  verbs: [get, list, watch]
- apiGroups: [machine.openshift.io]
  resources: [machines]
  verbs: [get, list, watch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {user}-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {user}-reader}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {user}-events, namespace: default}}
rules:
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {user}-events, namespace: default}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {user}-events}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
"#
    )
}

/// Grants user `user` [`guard_rbac`], waits until it is in effect (it may list Machines and may
/// not read Secrets), and writes its kubeconfig into `dir`: a guard started with it runs with
/// least privilege.
pub async fn restricted_guard_kubeconfig(
    cp: &ControlPlane,
    user: &str,
    dir: &Path,
) -> Result<PathBuf> {
    apply(cp, &guard_rbac(user)).await?;
    wait_can_i(cp, "list", "machines.machine.openshift.io", user, true).await?;
    wait_can_i(cp, "list", "secrets", user, false).await?;
    kubeconfig(cp, user, dir)
}

/// Writes `<dir>/<user>.kubeconfig` authenticating as `user` with a bearer `token` (a
/// ServiceAccount's TokenRequest token), in `namespace` if given; returns its path.
pub fn token_kubeconfig(
    cp: &ControlPlane,
    user: &str,
    token: &str,
    namespace: Option<&str>,
    dir: &Path,
) -> Result<PathBuf> {
    let path = dir.join(format!("{user}.kubeconfig"));
    let namespace = namespace.map_or(String::new(), |n| format!("    namespace: {n}\n"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
             users:\n- name: {user}\n  user:\n    token: {token}\n\
             contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: {user}\n{namespace}\
             current-context: e2e\n",
            server = cp.server(),
            ca = cp.pki().ca_path().display(),
        ),
    )?;
    Ok(path)
}
