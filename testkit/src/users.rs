//! Kubeconfigs for users other than the admin, authenticated with client certificates from the
//! control plane's CA, so a test can give them exactly the RBAC it wants (and take it away).

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

fn kubeconfig_with_groups(
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
    crate::scenario::wait_for(
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
