//! Reflector caches of the four kinds the policy reads, kept current by watches.
//!
//! Nodes are cached as metadata only (no spec/status) and every object loses its
//! managedFields: about 2.3 KiB per node (BENCHMARKS.md), 112 MiB at 50,000 nodes. A kind the cluster
//! does not serve yet (CRD missing) is logged and retried with backoff; the cache is
//! not ready until every kind has completed one full list.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::live;
use crate::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig, NodeMeta};
use crate::node_index::NodeIndex;
use crate::policy::PolicyMode;
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
    /// Starts watching `api` into a new store; `observe` sees every event after the store
    /// applied it. Returns the store and the driving tasks.
    fn start(
        api: Api<K>,
        what: &'static str,
        mut observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let (store, writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o: &mut K| o.meta_mut().managed_fields = None)
            .reflect(writer);
        let driver = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => observe(&event),
                    Err(e) => {
                        tracing::warn!(cache = what, error = %e, "watch failed; retrying with backoff")
                    }
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

/// The webhook's view of the cluster: four reflectors, an index of nodes by image digest
/// fed by the node watch, and a client for fresh reads.
pub struct Caches {
    client: Client,
    configs: Cached<MachineOSConfig>,
    builds: Cached<MachineOSBuild>,
    pools: Cached<MachineConfigPool>,
    nodes: Cached<PartialObjectMeta<Node>>,
    index: Arc<RwLock<NodeIndex>>,
    tasks: Vec<JoinHandle<()>>,
}

/// Keeps a [`NodeIndex`] in step with the node watch. A relist builds a new index on the
/// side and swaps it in when the list completes, as the reflector store does.
struct IndexFeeder {
    live: Arc<RwLock<NodeIndex>>,
    relist: Option<NodeIndex>,
}

impl IndexFeeder {
    fn observe(&mut self, event: &watcher::Event<PartialObjectMeta<Node>>) {
        use watcher::Event;
        match event {
            Event::Init => self.relist = Some(NodeIndex::default()),
            Event::InitApply(node) => {
                if let Some(next) = self.relist.as_mut() {
                    next.upsert(node);
                }
            }
            Event::InitDone => {
                if let Some(next) = self.relist.take() {
                    *write(&self.live) = next;
                }
            }
            Event::Apply(node) => write(&self.live).upsert(node),
            Event::Delete(node) => {
                if let Some(name) = &node.metadata.name {
                    write(&self.live).remove(name);
                }
            }
        }
    }
}

/// A poisoned lock only means a panic elsewhere mid-update; the index stays usable.
fn write(lock: &RwLock<NodeIndex>) -> std::sync::RwLockWriteGuard<'_, NodeIndex> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read(lock: &RwLock<NodeIndex>) -> std::sync::RwLockReadGuard<'_, NodeIndex> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Caches {
    /// Starts the watches; returns at once (see [`ClusterView::ready`]).
    pub fn start(client: Client) -> Self {
        let mut tasks = Vec::new();
        let (configs, t) = Cached::start(Api::all(client.clone()), "machineosconfigs", |_| {});
        tasks.extend(t);
        let (builds, t) = Cached::start(Api::all(client.clone()), "machineosbuilds", |_| {});
        tasks.extend(t);
        let (pools, t) = Cached::start(Api::all(client.clone()), "machineconfigpools", |_| {});
        tasks.extend(t);
        let index = Arc::new(RwLock::new(NodeIndex::default()));
        let mut feeder = IndexFeeder {
            live: Arc::clone(&index),
            relist: None,
        };
        let (nodes, t) = Cached::start(Api::all(client.clone()), "nodes", move |e| {
            feeder.observe(e)
        });
        tasks.extend(t);
        Self {
            client,
            configs,
            builds,
            pools,
            nodes,
            index,
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
    fn objects(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: self.configs.store.state(),
            machine_os_builds: self.builds.store.state(),
            pools: self.pools.store.state(),
            nodes: Vec::new(),
        }
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        match digests {
            Some(d) => read(&self.index)
                .candidates(d, mode)
                .iter()
                .filter_map(|name| self.nodes.store.get(&ObjectRef::new(name)))
                .collect(),
            None => self.nodes.store.state(),
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
            ("nodes_with_images", read(&self.index).len()),
        ]
    }
}
