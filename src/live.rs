//! Direct reads from the API server: the `check` command's source, and the fresh read
//! that confirms a cache allow before the webhook answers it.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use serde::de::DeserializeOwned;

use crate::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::snapshot::Snapshot;

/// Page size for list calls; 50,000 nodes come back in 100 requests.
const PAGE: u32 = 500;

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
}

/// A client for `--kubeconfig`/`--context`, or the usual inference (in-cluster,
/// `$KUBECONFIG`, `~/.kube/config`) when neither is given.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Client, LiveError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| LiveError::Kubeconfig(format!("{}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| LiveError::Kubeconfig(e.to_string()))
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| LiveError::Kubeconfig(e.to_string())),
        (None, None) => Config::infer()
            .await
            .map_err(|e| LiveError::Kubeconfig(e.to_string())),
    }?;
    Client::try_from(config).map_err(|e| LiveError::Kubeconfig(e.to_string()))
}

/// Everything the policy reads, listed now. An API the cluster does not serve (CRD
/// missing) lists as empty and is named in `missing`.
pub async fn snapshot(client: &Client) -> Result<(Snapshot, Vec<&'static str>), LiveError> {
    let (moscs, mosbs, pools, nodes) = tokio::try_join!(
        list::<MachineOSConfig>(client, "machineosconfigs"),
        list::<MachineOSBuild>(client, "machineosbuilds"),
        list::<MachineConfigPool>(client, "machineconfigpools"),
        list::<PartialObjectMeta<Node>>(client, "nodes"),
    )?;
    let mut missing = Vec::new();
    let mut note = |served: bool, what: &'static str| {
        if !served {
            missing.push(what);
        }
    };
    note(
        moscs.is_some(),
        "machineosconfigs.machineconfiguration.openshift.io",
    );
    note(
        mosbs.is_some(),
        "machineosbuilds.machineconfiguration.openshift.io",
    );
    note(
        pools.is_some(),
        "machineconfigpools.machineconfiguration.openshift.io",
    );
    note(nodes.is_some(), "nodes");
    let snapshot = Snapshot {
        machine_os_configs: moscs.unwrap_or_default(),
        machine_os_builds: mosbs.unwrap_or_default(),
        pools: pools.unwrap_or_default(),
        nodes: nodes.unwrap_or_default(),
    };
    Ok((snapshot, missing))
}

/// Everything a decision reads besides the object being deleted (which the admission request
/// carries), listed now: nodes (metadata only), builds, pools and MachineOSConfigs. The last
/// two are small lists; reading them here means a cache whose watch is failing cannot turn
/// a stale pool status into an allow. An API the cluster does not serve lists as empty.
pub async fn decision_inputs(client: &Client) -> Result<Snapshot, LiveError> {
    let (nodes, builds, pools, configs) = tokio::try_join!(
        list::<PartialObjectMeta<Node>>(client, "nodes"),
        list::<MachineOSBuild>(client, "machineosbuilds"),
        list::<MachineConfigPool>(client, "machineconfigpools"),
        list::<MachineOSConfig>(client, "machineosconfigs"),
    )?;
    Ok(Snapshot {
        machine_os_configs: configs.unwrap_or_default(),
        machine_os_builds: builds.unwrap_or_default(),
        pools: pools.unwrap_or_default(),
        nodes: nodes.unwrap_or_default(),
    })
}

/// Lists every object of a cluster-scoped kind, page by page; `None` when the API
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
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}
