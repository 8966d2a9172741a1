//! Caches of the kinds the policy reads, kept current by watches: kube's reflector for the three
//! MCO kinds (managedFields dropped), the lean [`NodeCache`] for nodes, and optional reflectors for
//! Machines and the ClusterVersion. A required kind not served yet (CRD missing) is retried; the
//! cache is ready once every required kind completed one full list. The optional kinds never hold
//! readiness back: every allow is confirmed by a read that lists them, and a verdict without them
//! is the cautious one or MCO's own.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::access::error::{FreshError, NotReady};
use crate::access::live;
use crate::access::node_cache::NodeCache;
use crate::access::view::{ClusterView, Fresh, FreshNodes, ReadSteps};
use crate::access::watch::{Retry, WatchHealth};
use crate::core::cluster::{ClusterVersion, Machine};
use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::core::node::NodeMeta;
use crate::core::policy::PolicyMode;
use crate::core::snapshot::Snapshot;

/// A kind the caches hold: the name metrics, logs and `/readyz` give it, and whether the guard
/// decides without it. An optional kind (absent on many clusters: no Machine API on
/// user-provisioned ones, no ClusterVersion outside OpenShift) never holds readiness back and
/// never makes the view stale; its failures are logged at debug level.
#[derive(Clone, Copy, Debug)]
struct Kind {
    name: &'static str,
    optional: bool,
}

impl Kind {
    const fn required(name: &'static str) -> Self {
        Self {
            name,
            optional: false,
        }
    }

    const fn optional(name: &'static str) -> Self {
        Self {
            name,
            optional: true,
        }
    }
}

/// The kinds besides nodes, in the order metrics and `/readyz` list them.
const CONFIGS: Kind = Kind::required("machineosconfigs");
const BUILDS: Kind = Kind::required("machineosbuilds");
const POOLS: Kind = Kind::required("machineconfigpools");
const MACHINES: Kind = Kind::optional("machines");
const VERSIONS: Kind = Kind::optional("clusterversions");
/// The node cache, which is not a reflector (`access::node_cache`).
const NODES: Kind = Kind::required("nodes");

/// What every cache reports (each kind's reflector, and the node cache), so readiness,
/// staleness and sizes are one loop over [`Caches::table`].
struct CacheState<'a> {
    kind: Kind,
    /// Its first full list completed.
    synced: bool,
    health: &'a WatchHealth,
    len: usize,
}

/// One reflector store, whether its first list completed, and its watch's health.
struct Cached<K: Resource<DynamicType = ()> + Clone + 'static> {
    kind: Kind,
    store: Store<K>,
    ready: Arc<AtomicBool>,
    health: Arc<WatchHealth>,
}

impl<K> Cached<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `kind` into a new store; its driving tasks join `tasks`.
    fn start(
        client: &Client,
        kind: Kind,
        stale_after: Duration,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Self {
        let api: Api<K> = Api::all(client.clone());
        let (what, optional) = (kind.name, kind.optional);
        let (store, mut writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let health = Arc::new(WatchHealth::new(what, stale_after));
        let watch_health = Arc::clone(&health);
        let driver = tokio::spawn(async move {
            let mut retry = Retry::new();
            // Each pass is one watcher, and a failure ends it: a fresh watcher lists first and
            // the store swaps the list in whole (`InitDone`), which shows the cache current
            // again; a watch resumed on a quiet kind would deliver nothing to show it.
            loop {
                let stream = watcher(api.clone(), watcher::Config::default())
                    .modify(|o: &mut K| o.meta_mut().managed_fields = None);
                let mut stream = std::pin::pin!(stream);
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) => {
                            writer.apply_watcher_event(&event);
                            // A list swapped in or a change: `Init` comes before any request
                            // and `InitApply` only fills the side buffer.
                            if !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
                            {
                                watch_health.recovered("the watch delivers again");
                            }
                        }
                        Err(e) if optional => {
                            tracing::debug!(cache = what, error = %e, "optional watch failed; retrying with backoff");
                            break;
                        }
                        Err(e) => {
                            watch_health.failed(Instant::now(), &e);
                            break;
                        }
                    }
                }
                retry.wait().await;
            }
        });
        let (flag, reader) = (Arc::clone(&ready), store.clone());
        let readiness = tokio::spawn(async move {
            if reader.wait_until_ready().await.is_ok() {
                flag.store(true, Ordering::Release);
                tracing::info!(cache = what, objects = reader.len(), "cache synced");
            }
        });
        tasks.extend([driver, readiness]);
        Self {
            kind,
            store,
            ready,
            health,
        }
    }

    fn state(&self) -> CacheState<'_> {
        CacheState {
            kind: self.kind,
            synced: self.ready.load(Ordering::Acquire),
            health: &self.health,
            len: self.store.len(),
        }
    }
}

/// The webhook's view of the cluster: a reflector per kind, the node cache (with its index of
/// nodes by image digest), and a client for fresh reads.
pub struct Caches {
    client: Client,
    configs: Cached<MachineOSConfig>,
    builds: Cached<MachineOSBuild>,
    pools: Cached<MachineConfigPool>,
    machines: Cached<Machine>,
    versions: Cached<ClusterVersion>,
    nodes: NodeCache,
    fence_wait: Duration,
    tasks: Vec<JoinHandle<()>>,
}

/// How long a confirmation waits for the node cache to pass the fence before it also starts
/// listing every node (whichever finishes first answers). Node watch events arrive every few
/// milliseconds on a large cluster (kubelets and MCO update nodes); a quiet cluster gets no
/// event to pass the fence with, and is small enough for the list to be cheap.
pub const DEFAULT_FENCE_WAIT: Duration = Duration::from_millis(100);

impl Caches {
    /// Starts the watches; returns at once (see [`ClusterView::readiness`]). A cache whose watch
    /// has failed continuously for `stale_after` makes the view not ready until it recovers.
    pub fn start(client: Client, stale_after: Duration) -> Self {
        let mut tasks = Vec::new();
        Self {
            configs: Cached::start(&client, CONFIGS, stale_after, &mut tasks),
            builds: Cached::start(&client, BUILDS, stale_after, &mut tasks),
            pools: Cached::start(&client, POOLS, stale_after, &mut tasks),
            machines: Cached::start(&client, MACHINES, stale_after, &mut tasks),
            versions: Cached::start(&client, VERSIONS, stale_after, &mut tasks),
            nodes: NodeCache::start(client.clone(), stale_after),
            client,
            fence_wait: DEFAULT_FENCE_WAIT,
            tasks,
        }
    }

    /// Every cache, in the order metrics and `/readyz` list them: the one table the readiness,
    /// staleness and size reports walk.
    fn table(&self) -> [CacheState<'_>; 6] {
        let nodes = CacheState {
            kind: NODES,
            synced: self.nodes.synced(),
            health: self.nodes.health(),
            len: self.nodes.sizes().0,
        };
        [
            self.configs.state(),
            self.builds.state(),
            self.pools.state(),
            self.machines.state(),
            self.versions.state(),
            nodes,
        ]
    }

    /// Sets how long a confirmation waits for the node cache before also listing nodes.
    pub fn with_fence_wait(mut self, wait: Duration) -> Self {
        self.fence_wait = wait;
        self
    }

    /// Everything a decision reads, at least as fresh as the moment this is called: builds,
    /// pools and MOSCs listed now, and nodes from the node cache once it has applied the node
    /// collection's current revision, or a list of every node if that is quicker. The lists and
    /// the fence run at once: a consistent list of a quiet collection waits for the API
    /// server's next progress notification from etcd (up to 100 ms), which the fence need not
    /// wait behind. A node list needs the fresh pools (it keeps only the labels their
    /// selectors read), so it starts once both the lists and `--fence-wait-ms` are done.
    async fn fresh_read(&self) -> Result<Fresh, FreshError> {
        let started = tokio::time::Instant::now();
        let mut steps = ReadSteps::default();
        let objects = async {
            let objects = live::decision_objects(&self.client).await;
            (objects, started.elapsed())
        };
        let fence = async {
            let revision = live::node_revision(&self.client).await?;
            let read = started.elapsed();
            // Not an etcd revision: no fence to wait on.
            let Some(revision) = revision else {
                return Ok::<_, live::LiveError>((None, read, None));
            };
            let caught_up = tokio::time::timeout(self.fence_wait, self.nodes.caught_up(revision))
                .await
                .ok()
                .map(|()| started.elapsed().saturating_sub(read));
            Ok((Some(revision), read, caught_up))
        };
        let ((objects, lists), fence) = tokio::join!(objects, fence);
        let (objects, (revision, read, caught_up)) = (objects?, fence?);
        steps.lists = lists;
        steps.revision = read;
        steps.catch_up = caught_up;
        let nodes = match revision {
            _ if caught_up.is_some() => FreshNodes::Cached,
            None => {
                let listed = self.listed_nodes(&objects.pools).await?;
                steps.node_list = Some(started.elapsed());
                listed
            }
            Some(revision) => {
                let fence = self.nodes.caught_up(revision);
                let mut fence = std::pin::pin!(fence);
                tokio::select! {
                    biased;
                    () = fence.as_mut() => {
                        steps.catch_up = Some(started.elapsed().saturating_sub(read));
                        FreshNodes::Cached
                    }
                    listed = self.listed_nodes(&objects.pools) => match listed {
                        Ok(nodes) => {
                            steps.node_list = Some(started.elapsed());
                            nodes
                        }
                        // The cache may still catch up within the caller's deadline.
                        Err(e) => {
                            tracing::debug!(error = %e, "listing nodes failed; waiting for the node cache");
                            fence.await;
                            steps.catch_up = Some(started.elapsed().saturating_sub(read));
                            FreshNodes::Cached
                        }
                    },
                }
            }
        };
        Ok(Fresh {
            objects,
            nodes,
            steps,
        })
    }

    async fn listed_nodes(
        &self,
        pools: &[Arc<MachineConfigPool>],
    ) -> Result<FreshNodes, live::LiveError> {
        let nodes = live::nodes_for(&self.client, pools).await?;
        let nodes = nodes.ok_or(live::LiveError::NotServed(vec!["nodes"]))?;
        Ok(FreshNodes::Listed(nodes))
    }

    /// Each required cache, and "machineconfigpools (watch failing for 35s: ...)" when it is
    /// stale at `now` (optional ones are never stale).
    fn stale_at(&self, now: Instant) -> Vec<(&'static str, Option<String>)> {
        self.table()
            .into_iter()
            .filter(|c| !c.kind.optional)
            .map(|c| {
                let name = c.kind.name;
                let stale = c.health.stale(now).map(|(for_, error)| {
                    format!("{name} (watch failing for {}s: {error})", for_.as_secs())
                });
                (name, stale)
            })
            .collect()
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
            machines: self.machines.store.state(),
            release: crate::core::cluster::running(&self.versions.store.state()),
        }
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        self.nodes.nodes(digests, mode)
    }

    fn unreached_nodes(&self) -> Vec<Arc<NodeMeta>> {
        self.nodes.unreached()
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        Box::pin(self.fresh_read())
    }

    fn node_generation(&self) -> Option<u64> {
        Some(self.nodes.generation())
    }

    fn readiness(&self) -> Result<(), NotReady> {
        let unsynced: Vec<&str> = self
            .table()
            .into_iter()
            .filter(|c| !c.kind.optional && !c.synced)
            .map(|c| c.kind.name)
            .collect();
        if !unsynced.is_empty() {
            return Err(NotReady::Unsynced(unsynced));
        }
        let stale: Vec<String> = self
            .stale_at(Instant::now())
            .into_iter()
            .filter_map(|(_, s)| s)
            .collect();
        if stale.is_empty() {
            Ok(())
        } else {
            Err(NotReady::Stale(stale))
        }
    }

    fn stale(&self) -> Vec<(&'static str, bool)> {
        self.stale_at(Instant::now())
            .into_iter()
            .map(|(what, s)| (what, s.is_some()))
            .collect()
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        self.table()
            .into_iter()
            .map(|c| (c.kind.name, c.len))
            .chain([("nodes_with_images", self.nodes.sizes().1)])
            .collect()
    }
}
