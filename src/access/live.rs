//! Direct reads from the API server: the `check` command's source, and the fresh read
//! that confirms a cache allow before the webhook answers it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::core::cluster::{ClusterVersion, Machine};
use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::core::node::NodeMeta;
use crate::core::node::{Interner, WireMeta, WireNode};
use crate::core::release::{ClusterRelease, Rules};
use crate::core::snapshot::Snapshot;

/// Page size for list calls of the MCO kinds (a handful of objects each).
const PAGE: u32 = 500;
/// Page size for node lists: 50,000 nodes come back in 50 requests of a few MiB each.
pub(crate) const NODE_PAGE: u32 = 1000;
/// Bound on opening a connection to the API server, TLS handshake included. kube's default
/// (30 s) let a watch that reconnects into a black-holed API server hang unnoticed for as long;
/// 5 s is ample on any network an admission webhook can live with.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one page of a node list (a page of 1,000 nodes takes well under a second).
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// The node collection's path.
pub(crate) const NODES: &str = "/api/v1/nodes";

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("loading kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("listing {what} from the API server: {}", chain(source))]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("listing nodes: the request task failed: {0}")]
    Task(String),
    /// A kind every decision reads answered 404: not knowing its objects is not knowing there
    /// are none (an API server that just started can answer 404 for a custom resource it
    /// serves, kubernetes/kubernetes#115241).
    #[error("the API server answered 404 (not served) for {}", .0.join(", "))]
    NotServed(Vec<&'static str>),
}

impl LiveError {
    pub(crate) fn list(what: &'static str, source: kube::Error) -> Self {
        LiveError::List { what, source }
    }
}

/// A client for `--kubeconfig`/`--context`, or the usual inference (in-cluster,
/// `$KUBECONFIG`, `~/.kube/config`) when neither is given.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Client, LiveError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let mut config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| LiveError::Kubeconfig(format!("{}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(unusable)?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options).await.map_err(unusable)?,
        (None, None) => Config::infer().await.map_err(unusable)?,
    };
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    Client::try_from(config).map_err(unusable)
}

/// A configuration (kubeconfig, in-cluster, or the client built from it) that cannot be used.
fn unusable(e: impl std::fmt::Display) -> LiveError {
    LiveError::Kubeconfig(e.to_string())
}

/// Everything the policy reads, listed now. An API the cluster does not serve (CRD
/// missing) lists as empty and is named in `missing`.
pub async fn snapshot(client: &Client) -> Result<(Snapshot, Vec<&'static str>), LiveError> {
    let (mut snapshot, mut missing) = listed_objects(client).await?;
    match nodes_for(client, &snapshot.pools).await? {
        Some(nodes) => snapshot.nodes = nodes,
        None => missing.push("nodes"),
    }
    Ok((snapshot, missing))
}

/// Everything a decision reads besides nodes and the object being deleted (which the
/// admission request carries), listed now: builds, pools, MachineOSConfigs, Machines and the
/// release. They are small lists; reading them fresh means a cache whose watch is failing
/// cannot turn a stale pool status or a machine that just started provisioning into an allow.
/// Machines and ClusterVersions the cluster does not serve list as empty; MachineOSConfigs,
/// builds or pools not served are an error ([`LiveError::NotServed`]): read as none, they
/// would allow a deletion no build guards.
pub async fn decision_objects(client: &Client) -> Result<Snapshot, LiveError> {
    let (snapshot, missing) = listed_objects(client).await?;
    let required: Vec<&'static str> = missing
        .into_iter()
        .filter(|kind| REQUIRED.contains(kind))
        .collect();
    if required.is_empty() {
        Ok(snapshot)
    } else {
        Err(LiveError::NotServed(required))
    }
}

const CONFIGS_API: &str = "machineosconfigs.machineconfiguration.openshift.io";
const BUILDS_API: &str = "machineosbuilds.machineconfiguration.openshift.io";
const POOLS_API: &str = "machineconfigpools.machineconfiguration.openshift.io";
/// The kinds besides nodes no decision can be made without.
const REQUIRED: [&str; 3] = [CONFIGS_API, BUILDS_API, POOLS_API];

/// The kinds besides nodes, each listed in full, and the APIs the cluster does not serve.
pub(crate) async fn listed_objects(
    client: &Client,
) -> Result<(Snapshot, Vec<&'static str>), LiveError> {
    let (configs, builds, pools, (machines, release, versions_served)) = tokio::try_join!(
        list::<MachineOSConfig>(client, "machineosconfigs"),
        list::<MachineOSBuild>(client, "machineosbuilds"),
        list::<MachineConfigPool>(client, "machineconfigpools"),
        around_the_pools(client),
    )?;
    let served = [
        (configs.is_some(), CONFIGS_API),
        (builds.is_some(), BUILDS_API),
        (pools.is_some(), POOLS_API),
        (machines.is_some(), "machines.machine.openshift.io"),
        (versions_served, "clusterversions.config.openshift.io"),
    ];
    let missing = served
        .into_iter()
        .filter(|(served, _)| !served)
        .map(|(_, what)| what)
        .collect();
    let snapshot = Snapshot {
        machine_os_configs: configs.unwrap_or_default(),
        machine_os_builds: builds.unwrap_or_default(),
        pools: pools.unwrap_or_default(),
        nodes: Vec::new(),
        machines: machines.unwrap_or_default(),
        release,
    };
    Ok((snapshot, missing))
}

/// The kinds around the pools a decision reads: Machines in every namespace (`None` where the
/// Machine API is not served), the release, and whether ClusterVersions are served. A
/// ClusterVersion the guard may not read counts as an unknown release (the most cautious rules);
/// Machines it may not list are an error where they matter (the release serves joining machines,
/// or is unknown), and count as none on the releases that serve them nothing.
async fn around_the_pools(
    client: &Client,
) -> Result<(Option<Vec<Arc<Machine>>>, ClusterRelease, bool), LiveError> {
    let (machines, versions) = tokio::join!(
        list::<Machine>(client, "machines"),
        list::<ClusterVersion>(client, "clusterversions"),
    );
    let (versions_served, versions) = match versions {
        Ok(v) => (v.is_some(), v),
        Err(e) if forbidden(&e) => {
            tracing::warn!(error = %e, "cannot read the ClusterVersion; deciding with the most cautious rules");
            (true, None)
        }
        Err(e) => return Err(e),
    };
    let release = crate::core::cluster::running(versions.as_deref().unwrap_or_default());
    let machines = match machines {
        Err(e) if forbidden(&e) && !Rules::for_release(&release).serves_joining_machines => None,
        other => other?,
    };
    Ok((machines, release, versions_served))
}

/// Whether a list failed with 403 (RBAC).
fn forbidden(e: &LiveError) -> bool {
    matches!(e, LiveError::List { source: kube::Error::Api(s), .. } if s.code == 403)
}

/// Every node, listed now and kept lean: besides the name and image annotations, only the
/// labels membership reads (`policy::membership_labels`: all a decision needs to place a node in its pool;
/// [`decision_objects`] must have read `pools` first). Pages are decoded one at a time, so
/// the read never holds more than one page of metadata. `None` if nodes are not served.
pub async fn nodes_for(
    client: &Client,
    pools: &[Arc<MachineConfigPool>],
) -> Result<Option<Vec<Arc<NodeMeta>>>, LiveError> {
    let keys = crate::core::policy::membership_labels(pools);
    let mut interner = Interner::default();
    let mut nodes = Vec::new();
    let listed = list_nodes(client, |page| {
        nodes.extend(page.into_iter().map(|meta| {
            Arc::new(NodeMeta::from_wire(meta, &mut interner, |k| {
                keys.contains(k)
            }))
        }))
    })
    .await?;
    crate::access::memory::return_free_memory();
    Ok(listed.map(|_| nodes))
}

/// Lists every node's metadata, [`NODE_PAGE`] at a time, handing each page to `page`.
/// Returns the list's revision (the resourceVersion of the state it shows, `Some(None)` if
/// that is not a number), or `None` if the API server does not serve nodes (404).
///
/// The next page is requested as soon as this one's continue token is read, so the API
/// server encodes it while this page is decoded: at 50,000 nodes the two costs are of the
/// same order, and a relist is the guard's time to ready.
pub(crate) async fn list_nodes(
    client: &Client,
    mut page: impl FnMut(Vec<WireMeta>),
) -> Result<Option<Option<u64>>, LiveError> {
    let fetch = |params: ListParams| {
        let client = client.clone();
        Prefetch(tokio::spawn(async move {
            node_page_text(&client, &params).await
        }))
    };
    let undecodable = |e| LiveError::list("nodes", kube::Error::SerdeError(e));
    let mut next = fetch(ListParams::default().limit(NODE_PAGE));
    let mut revision = None;
    loop {
        let text = match (&mut next.0).await {
            Ok(Ok(text)) => text,
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => return Ok(None),
            Ok(Err(source)) => return Err(LiveError::list("nodes", source)),
            Err(e) => return Err(LiveError::Task(e.to_string())),
        };
        let head: ListHead = serde_json::from_str(&text).map_err(undecodable)?;
        // A paginated list shows the state at its first page's resourceVersion.
        if revision.is_none() {
            revision = Some(revision_of(head.metadata.resource_version.as_deref()));
        }
        let more = head.metadata.continue_.filter(|token| !token.is_empty());
        next = match &more {
            Some(token) => fetch(ListParams::default().limit(NODE_PAGE).continue_token(token)),
            None => Prefetch(tokio::spawn(async { Ok(String::new()) })),
        };
        let list: NodeList = serde_json::from_str(&text).map_err(undecodable)?;
        drop(text);
        let items = list.items.unwrap_or_default();
        page(items.into_iter().map(|n| n.metadata).collect());
        if more.is_none() {
            return Ok(Some(revision.flatten()));
        }
    }
}

/// The node collection's resourceVersion now: a consistent read (a list of one node's
/// metadata), so every node change committed before this call is at or below it. `None` if
/// the API server's resourceVersions are not numbers.
pub async fn node_revision(client: &Client) -> Result<Option<u64>, LiveError> {
    let text = node_page_text(client, &ListParams::default().limit(1))
        .await
        .map_err(|e| LiveError::list("nodes", e))?;
    let list: NodeList = serde_json::from_str(&text)
        .map_err(|e| LiveError::list("nodes", kube::Error::SerdeError(e)))?;
    Ok(revision_of(list.metadata.resource_version.as_deref()))
}

/// A resourceVersion as etcd's revision number. Kubernetes calls them opaque, but the API
/// server itself orders them this way (watch cache, consistent reads) for etcd3 storage.
pub(crate) fn revision_of(rv: Option<&str>) -> Option<u64> {
    rv?.trim().parse().ok()
}

#[derive(Deserialize)]
struct NodeList {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Option<Vec<WireNode>>,
}

/// A page being fetched; the request is dropped with it (a list abandoned half-way, when the
/// fence passed first, stops fetching).
struct Prefetch(tokio::task::JoinHandle<Result<String, kube::Error>>);

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A node list's metadata alone (its items are skipped, not decoded).
#[derive(Deserialize)]
struct ListHead {
    #[serde(default)]
    metadata: ListMeta,
}

/// One list request for node metadata, as the API server sent it; bounded by [`PAGE_TIMEOUT`]
/// (a connection that stopped answering must not stall a relist for good).
async fn node_page_text(client: &Client, params: &ListParams) -> Result<String, kube::Error> {
    let request = kube::core::Request::new(NODES)
        .list_metadata(params)
        .map_err(kube::Error::BuildRequest)?;
    match tokio::time::timeout(PAGE_TIMEOUT, client.request_text(request)).await {
        Ok(result) => result,
        Err(_) => Err(kube::Error::Service(
            format!("no answer to a node list request within {PAGE_TIMEOUT:?}").into(),
        )),
    }
}

/// Lists every object of a kind (in every namespace), page by page; `None` when the API
/// server does not serve the kind (404).
async fn list<K>(client: &Client, what: &'static str) -> Result<Option<Vec<Arc<K>>>, LiveError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let mut params = ListParams::default().limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(source) => return Err(LiveError::List { what, source }),
        };
        out.extend(page.items.into_iter().map(|mut item| {
            item.meta_mut().managed_fields = None;
            Arc::new(item)
        }));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(Some(out)),
        }
    }
}

/// An error and its causes on one line ("client error (Connect): tcp connect error:
/// Connection refused"), since the top-level kube error alone rarely says what failed.
pub(crate) fn chain(e: &kube::Error) -> String {
    crate::access::registry::http::chain(e)
}
