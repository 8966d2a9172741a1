//! Reflector caches of the four kinds the policy reads, kept current by watches.
//!
//! Nodes are cached as metadata only (no spec/status) and every object loses its
//! managedFields, which keeps 50,000 nodes in tens of megabytes. A kind the cluster
//! does not serve yet (CRD missing) is logged and retried with backoff; the cache is
//! not ready until every kind has completed one full list.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::live;
use crate::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::snapshot::Snapshot;
use crate::view::ClusterView;

/// One reflector store and whether its first list completed.
struct Cached<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    ready: Arc<AtomicBool>,
}

impl<K> Cached<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` into a new store; returns the store and the driving task.
    fn start(api: Api<K>, what: &'static str) -> (Self, Vec<JoinHandle<()>>) {
        let (store, writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o: &mut K| o.meta_mut().managed_fields = None)
            .reflect(writer)
            .applied_objects();
        let driver = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                if let Err(e) = item {
                    tracing::warn!(cache = what, error = %e, "watch failed; retrying with backoff");
                }
            }
        });
        let (flag, reader) = (Arc::clone(&ready), store.clone());
        let readiness = tokio::spawn(async move {
            if reader.wait_until_ready().await.is_ok() {
                flag.store(true, Ordering::Release);
                tracing::info!(cache = what, objects = reader.len(), "cache synced");
            }
        });
        (Self { store, ready }, vec![driver, readiness])
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// The webhook's view of the cluster: four reflectors plus a client for fresh reads.
pub struct Caches {
    client: Client,
    configs: Cached<MachineOSConfig>,
    builds: Cached<MachineOSBuild>,
    pools: Cached<MachineConfigPool>,
    nodes: Cached<PartialObjectMeta<Node>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Caches {
    /// Starts the watches; returns at once (see [`ClusterView::ready`]).
    pub fn start(client: Client) -> Self {
        let mut tasks = Vec::new();
        let (configs, t) = Cached::start(Api::all(client.clone()), "machineosconfigs");
        tasks.extend(t);
        let (builds, t) = Cached::start(Api::all(client.clone()), "machineosbuilds");
        tasks.extend(t);
        let (pools, t) = Cached::start(Api::all(client.clone()), "machineconfigpools");
        tasks.extend(t);
        let (nodes, t) = Cached::start(Api::all(client.clone()), "nodes");
        tasks.extend(t);
        Self {
            client,
            configs,
            builds,
            pools,
            nodes,
            tasks,
        }
    }
}

impl Drop for Caches {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl ClusterView for Caches {
    fn cached(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: self.configs.store.state(),
            machine_os_builds: self.builds.store.state(),
            pools: self.pools.store.state(),
            nodes: self.nodes.store.state(),
        }
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Snapshot, String>> {
        Box::pin(async move {
            let (nodes, machine_os_builds) = live::nodes_and_builds(&self.client)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Snapshot {
                machine_os_configs: self.configs.store.state(),
                machine_os_builds,
                pools: self.pools.store.state(),
                nodes,
            })
        })
    }

    fn ready(&self) -> bool {
        self.configs.ready() && self.builds.ready() && self.pools.ready() && self.nodes.ready()
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("machineosconfigs", self.configs.store.len()),
            ("machineosbuilds", self.builds.store.len()),
            ("machineconfigpools", self.pools.store.len()),
            ("nodes", self.nodes.store.len()),
        ]
    }
}
