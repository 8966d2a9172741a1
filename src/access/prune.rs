//! What `prune --apply` writes to a live cluster, with the admin's own credentials: one
//! MachineOSBuild's deletion, conditional on the uid and resourceVersion it was planned from (a
//! delete precondition: the API server refuses it if the build changed or was replaced since
//! the read), and whether that build is gone yet.
//!
//! The delete goes through the API server, so MCO's MOSB-delete handler removes the image as it
//! does for any hand deletion, and the guard's webhook reviews it like any other.

use kube::Client;
use kube::api::{Api, DeleteParams, Preconditions};

use crate::access::live::{LiveError, chain};
use crate::core::model::MachineOSBuild;

/// Why a delete was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// 409: a precondition failed (the build changed or was replaced since the read). Nothing
    /// was deleted.
    #[error("the build changed since it was read: {0}")]
    Changed(String),
    /// 404: it is gone already.
    #[error("the build is gone")]
    Gone,
    /// The API server refused it (an admission webhook such as the guard's, RBAC, a policy):
    /// its message as the API server gave it. Nothing was deleted.
    #[error("{0}")]
    Refused(String),
    /// The request failed on the way (it may or may not have been applied).
    #[error("deleting the build: {}", chain(.0))]
    Failed(#[source] kube::Error),
}

/// Deletes MachineOSBuild `name` if it still has `uid` and `resource_version` (both always
/// sent: a delete without them could remove a build other than the one planned).
pub async fn delete_build(
    client: &Client,
    name: &str,
    uid: &str,
    resource_version: &str,
) -> Result<(), DeleteError> {
    let api: Api<MachineOSBuild> = Api::all(client.clone());
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: Some(resource_version.to_string()),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(DeleteError::Changed(s.message)),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(DeleteError::Gone),
        Err(kube::Error::Api(s)) => Err(DeleteError::Refused(s.message)),
        Err(e) => Err(DeleteError::Failed(e)),
    }
}

/// Whether the MachineOSBuild `name` with `uid` still exists (a new one of the same name is
/// another build).
pub async fn build_exists(client: &Client, name: &str, uid: &str) -> Result<bool, LiveError> {
    let api: Api<MachineOSBuild> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(build)) => Ok(build.metadata.uid.as_deref() == Some(uid)),
        Ok(None) => Ok(false),
        Err(e) => Err(LiveError::list("machineosbuilds", e)),
    }
}
