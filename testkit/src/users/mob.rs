//! The machine-os-builder's identity on the kit's control plane: the ServiceAccount
//! `openshift-machine-config-operator/machine-os-builder`, RBAC like MCO's own
//! `manifests/machineosbuilder/clusterrole.yaml` reduced to what the simulator's build
//! controller does, and a token from the TokenRequest API used as a bearer token. The simulator's
//! build controller makes every API call with it ([`client`]), so the API server (and any
//! webhook) sees MCO's real user name [`MOB_USER`] with the groups it gives every service
//! account (`system:serviceaccounts`, `system:serviceaccounts:openshift-machine-config-operator`,
//! `system:authenticated`).
//!
//! Why a token and not a client certificate: the API server itself then authenticates the
//! builder as a service account (the same authenticator, user name and groups as on a cluster,
//! and RBAC bound to a `ServiceAccount` subject as MCO's manifests bind it); a certificate would
//! only imitate the name, and the kit's CA puts at most one group in one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;

pub use crate::mco::{MOB_NAMESPACE, MOB_SERVICE_ACCOUNT, MOB_USER};

use crate::Result;
use crate::controlplane::{ControlPlane, client_from_kubeconfig};
use crate::users;

/// How long the builder's token lasts (longer than any test or soak).
const TOKEN_SECONDS: i64 = 7 * 24 * 3600;

/// The ClusterRole and its binding: MCO's `machine-os-builder` rules (same groups, resources
/// and verb names), cut to exactly the calls the simulator's build controller makes (it lists
/// instead of watching, and patches instead of updating). MCO grants more (`*` on its own
/// group, watch and update, Routes, ImageStreamTags, Leases, Events, Pods).
pub fn rbac() -> String {
    format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: machine-os-builder}}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosconfigs/status]
  verbs: [get, list, patch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosbuilds]
  verbs: [get, list, create, patch, delete]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosbuilds/status]
  verbs: [patch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigpools]
  verbs: [get, list]
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, create, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: machine-os-builder}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: machine-os-builder}}
subjects:
- {{kind: ServiceAccount, namespace: {MOB_NAMESPACE}, name: {MOB_SERVICE_ACCOUNT}}}
"#
    )
}

/// Creates (or keeps) the ServiceAccount in `openshift-machine-config-operator` (which must
/// exist) and the RBAC, waits until it is in effect, and returns a token for it.
pub async fn token(cp: &ControlPlane) -> Result<String> {
    let client = cp.client();
    let sas: Api<ServiceAccount> = Api::namespaced(client, MOB_NAMESPACE);
    let sa: ServiceAccount = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": MOB_SERVICE_ACCOUNT, "namespace": MOB_NAMESPACE},
    }))?;
    match sas.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(format!("creating ServiceAccount {MOB_USER}: {e}").into()),
    }
    users::apply(cp, &rbac()).await?;
    users::wait_can_i(cp, "delete", "machineosbuilds", MOB_USER, true).await?;
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS},
    }))?;
    let issued = sas
        .create_token_request(MOB_SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("TokenRequest for {MOB_USER}: {e}"))?;
    issued
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("TokenRequest for {MOB_USER} returned no token").into())
}

/// Writes `<dir>/machine-os-builder.kubeconfig` authenticating with `token` (kubectl and the
/// guard's CLI can act as the builder with it); returns its path.
pub fn kubeconfig(cp: &ControlPlane, token: &str, dir: &Path) -> Result<PathBuf> {
    users::token_kubeconfig(cp, "machine-os-builder", token, None, dir)
}

/// A client acting as the machine-os-builder ([`token`], [`kubeconfig`] in the control plane's
/// directory), with the path of its kubeconfig.
pub async fn client(cp: &ControlPlane) -> Result<(kube::Client, PathBuf)> {
    let token = token(cp).await?;
    let path = kubeconfig(cp, &token, cp.dir())?;
    let client = client_from_kubeconfig(&path).await?;
    // The token authenticates at once; check it, so a broken identity fails here, not later.
    let check: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    tokio::time::timeout(Duration::from_secs(30), check.list(&Default::default()))
        .await
        .map_err(|_| format!("{MOB_USER} could not list nodes within 30 s"))?
        .map_err(|e| format!("{MOB_USER} cannot list nodes: {e}"))?;
    Ok((client, path))
}
