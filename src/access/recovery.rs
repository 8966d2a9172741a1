//! What `recover` reads from and writes to a live cluster, with the admin's own credentials (the
//! guard's ServiceAccount keeps no write on nodes): every Node whole (the drain annotations,
//! `spec.unschedulable` and the boot ID are not in the metadata the policy lists), the
//! MachineConfigs' names (metadata only: their contents are never held), one node re-read right
//! before its patch (and while `--apply` waits for it), and the conditional patch itself.

use std::collections::BTreeSet;

use kube::Client;
use kube::api::{GetParams, ListParams, Patch, PatchParams};
use kube::core::{ObjectList, Request};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::access::live::{self, LiveError, NODES};
use crate::core::recovery::{NodePatch, RecoveryNode, RecoverySnapshot};

/// Page size of the full node list: a real Node is 10 to 20 KiB of JSON.
const NODE_PAGE: u32 = 250;
/// Page size of the MachineConfig list (metadata only).
const MC_PAGE: u32 = 500;
const MACHINE_CONFIGS: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";

/// Everything a recovery plan reads, listed now, and the APIs the cluster does not serve.
pub async fn snapshot(client: &Client) -> Result<(RecoverySnapshot, Vec<&'static str>), LiveError> {
    let ((objects, mut missing), nodes, machine_configs) = tokio::try_join!(
        live::listed_objects(client),
        nodes(client),
        machine_configs(client),
    )?;
    if machine_configs.is_none() {
        missing.push("machineconfigs.machineconfiguration.openshift.io");
    }
    let snapshot = RecoverySnapshot {
        objects,
        nodes,
        machine_configs,
        disagreeing: BTreeSet::new(),
    };
    Ok((snapshot, missing))
}

/// What one node's plan rests on, read now: the MCO objects, the MachineConfigs' names and the
/// node itself (`--apply` re-plans each node from this right before its patch). The node is
/// absent from the snapshot when it is gone.
pub async fn fresh_for(client: &Client, node: &str) -> Result<RecoverySnapshot, LiveError> {
    let ((objects, _), machine_configs, node) = tokio::try_join!(
        live::listed_objects(client),
        machine_configs(client),
        get_node(client, node),
    )?;
    Ok(RecoverySnapshot {
        objects,
        nodes: node.into_iter().collect(),
        machine_configs,
        disagreeing: BTreeSet::new(),
    })
}

/// One node now, or `None` when it does not exist.
pub async fn get_node(client: &Client, name: &str) -> Result<Option<RecoveryNode>, LiveError> {
    let request = Request::new(NODES)
        .get(name, &GetParams::default())
        .map_err(|e| LiveError::list("nodes", kube::Error::BuildRequest(e)))?;
    match client.request::<RecoveryNode>(request).await {
        Ok(node) => Ok(Some(node)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(LiveError::list("nodes", e)),
    }
}

/// Why a patch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The API server refused it as invalid for the object it holds now: a `test` operation
    /// failed (the node moved since it was read). Nothing was written.
    #[error("the API server refused the patch: {0}")]
    Refused(String),
    /// The API server answered with another error status (403 Forbidden, 404, 429, ...): it
    /// decided before writing, so nothing was written.
    #[error("the API server answered {code}: {message}")]
    Rejected { code: u16, message: String },
    /// No answer, or a server error: the request may or may not have been applied.
    #[error("patching the node: {}", live::chain(.0))]
    Failed(#[source] kube::Error),
}

/// Applies `patch` to node `name` as one request (all its operations or none); returns the node
/// as the API server stored it.
pub async fn patch_node(
    client: &Client,
    name: &str,
    patch: &NodePatch,
) -> Result<RecoveryNode, PatchError> {
    let ops: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(patch.ops.clone()))
            .map_err(|e| PatchError::Failed(kube::Error::SerdeError(e)))?;
    let request = Request::new(NODES)
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(ops))
        .map_err(|e| PatchError::Failed(kube::Error::BuildRequest(e)))?;
    match client.request::<RecoveryNode>(request).await {
        Ok(node) => Ok(node),
        // A failed `test` operation: 422 (Invalid) on current API servers; 409 is a conflict.
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => {
            Err(PatchError::Refused(s.message))
        }
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => Err(PatchError::Rejected {
            code: s.code,
            message: s.message,
        }),
        Err(e) => Err(PatchError::Failed(e)),
    }
}

/// Every node, whole, page by page (each page decoded into the lean [`RecoveryNode`]).
async fn nodes(client: &Client) -> Result<Vec<RecoveryNode>, LiveError> {
    list_all(client, NODES, NODE_PAGE, false)
        .await
        .map_err(|e| LiveError::list("nodes", e))
}

/// A MachineConfig's metadata, reduced to its name.
#[derive(Clone, Deserialize)]
struct Named {
    #[serde(default)]
    metadata: NameOnly,
}

#[derive(Clone, Default, Deserialize)]
struct NameOnly {
    name: Option<String>,
}

/// The MachineConfigs' names (metadata only), or `None` when the API is not served.
async fn machine_configs(client: &Client) -> Result<Option<BTreeSet<String>>, LiveError> {
    match list_all::<Named>(client, MACHINE_CONFIGS, MC_PAGE, true).await {
        Ok(items) => Ok(Some(
            items.into_iter().filter_map(|i| i.metadata.name).collect(),
        )),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(LiveError::list("machineconfigs", e)),
    }
}

/// Every item of the collection at `path` (of its metadata alone when `metadata_only`), `limit`
/// a page.
async fn list_all<T: Clone + DeserializeOwned>(
    client: &Client,
    path: &str,
    limit: u32,
    metadata_only: bool,
) -> Result<Vec<T>, kube::Error> {
    let mut params = ListParams::default().limit(limit);
    let mut out = Vec::new();
    loop {
        let request = if metadata_only {
            Request::new(path).list_metadata(&params)
        } else {
            Request::new(path).list(&params)
        };
        let request = request.map_err(kube::Error::BuildRequest)?;
        let page: ObjectList<T> = client.request(request).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}
