//! The node cache: every node, lean ([`NodeMeta`]), kept current by a paged list and a watch of
//! node metadata, with the [`NodeIndex`] updated under the same lock; a watch channel publishes the
//! revision up to which it has applied the API server's node changes: the confirming read's fence
//! (docs/design.md, "a revision fence"). A watch delivers changes in revision order, so past
//! revision R the cache holds every node change committed at or before R. Hand-written rather than
//! kube's reflector (docs/design.md, "Crates tried, and why not").

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kube::Client;
use kube::api::WatchParams;
use kube::core::WatchEvent;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::access::live::{self, NODES};
use crate::access::watch::{Retry, WatchHealth};
use crate::core::node::NodeMeta;
use crate::core::node::{Interner, WireMeta, WireNode};
use crate::core::policy::NodeIndex;
use crate::core::policy::PolicyMode;

/// Server-side timeout of one watch request; the API server sends a bookmark shortly before
/// it (and about every minute), and the watch resumes from the last revision.
const WATCH_TIMEOUT_SECS: u32 = 290;
/// Applied changes between two purges of strings no node uses any more.
const PURGE_EVERY: usize = 4096;
/// A watch that delivers neither an event nor a bookmark for this long is dead (the API server
/// sends a bookmark about every minute on a quiet watch): it is dropped and re-established.
const IDLE_LIMIT: Duration = Duration::from_secs(90);
/// Bound on the API server accepting a watch request.
const WATCH_START_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a list or a watch of nodes failed.
#[derive(Debug, thiserror::Error)]
enum NodeWatchError {
    #[error(transparent)]
    List(#[from] live::LiveError),
    #[error("the API server does not serve nodes")]
    NotServed,
    #[error("the node list's resourceVersion is not a number")]
    Revision,
    #[error("building the node watch: {0}")]
    Request(#[from] kube::core::request::Error),
    #[error("{}", live::chain(.0))]
    Api(kube::Error),
    #[error("the API server did not accept the node watch within {WATCH_START_TIMEOUT:?}")]
    StartTimeout,
    #[error("the node watch delivered neither an event nor a bookmark for {IDLE_LIMIT:?}")]
    Idle,
    #[error("watch error {code}: {message}")]
    Event { code: u16, message: String },
}

/// What the cache holds; one lock, so the index and the nodes always agree.
#[derive(Default)]
struct NodeState {
    nodes: HashMap<Arc<str>, Arc<NodeMeta>>,
    index: NodeIndex,
    interner: Interner,
    /// Raised by every change to what a decision reads of a node (a node added, removed, or
    /// its lean copy changed; a relist): equal generations mean equal nodes. A kubelet's
    /// status update changes nothing kept, and raises nothing.
    generation: u64,
    applied_since_purge: usize,
}

impl NodeState {
    fn upsert(&mut self, meta: WireMeta) {
        let node = NodeMeta::from_wire(meta, &mut self.interner, |_| true);
        self.index.upsert(&node);
        let name = Arc::clone(node.shared_name());
        if self.nodes.get(&name).is_none_or(|old| **old != node) {
            self.generation += 1;
        }
        self.nodes.insert(name, Arc::new(node));
        self.applied();
    }

    fn remove(&mut self, name: &str) {
        self.index.remove(name);
        if self.nodes.remove(name).is_some() {
            self.generation += 1;
        }
        self.applied();
    }

    fn applied(&mut self) {
        self.applied_since_purge += 1;
        if self.applied_since_purge >= PURGE_EVERY {
            self.interner.purge();
            self.applied_since_purge = 0;
        }
    }
}

/// The node cache and the task that keeps it current (stopped when dropped).
pub struct NodeCache {
    state: Arc<RwLock<NodeState>>,
    revision: watch::Receiver<u64>,
    ready: Arc<AtomicBool>,
    health: Arc<WatchHealth>,
    task: JoinHandle<()>,
}

impl Drop for NodeCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NodeCache {
    /// Starts listing and watching nodes; returns at once (see [`NodeCache::synced`]).
    pub fn start(client: Client, stale_after: Duration) -> Self {
        let (tx, revision) = watch::channel(0);
        let driver = Driver {
            client,
            state: Arc::default(),
            revision: tx,
            ready: Arc::default(),
            health: Arc::new(WatchHealth::new("nodes", stale_after)),
        };
        Self {
            state: Arc::clone(&driver.state),
            revision,
            ready: Arc::clone(&driver.ready),
            health: Arc::clone(&driver.health),
            task: tokio::spawn(driver.run()),
        }
    }

    /// True once the first full list completed.
    pub fn synced(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(crate) fn health(&self) -> &WatchHealth {
        &self.health
    }

    /// Waits until the cache has applied every node change up to `revision` (forever if it
    /// never does: the caller bounds the wait).
    pub async fn caught_up(&self, revision: u64) {
        let mut rx = self.revision.clone();
        if rx.wait_for(|applied| *applied >= revision).await.is_err() {
            // The driver stopped (shutdown): the cache will never catch up.
            std::future::pending::<()>().await;
        }
    }

    /// The revision the cache has reached.
    pub fn revision(&self) -> u64 {
        *self.revision.borrow()
    }

    /// Nodes that may carry one of `digests` under `mode` (from the index), or every node.
    pub fn nodes(
        &self,
        digests: Option<&std::collections::BTreeSet<String>>,
        mode: PolicyMode,
    ) -> Vec<Arc<NodeMeta>> {
        let state = read(&self.state);
        match digests {
            Some(d) => state
                .index
                .candidates(d, mode)
                .iter()
                .filter_map(|name| state.nodes.get(name).cloned())
                .collect(),
            None => state.nodes.values().cloned().collect(),
        }
    }

    /// Nodes that have not reached their desired image, or whose images could not be indexed.
    pub fn unreached(&self) -> Vec<Arc<NodeMeta>> {
        let state = read(&self.state);
        state
            .index
            .unreached()
            .into_iter()
            .filter_map(|name| state.nodes.get(name).cloned())
            .collect()
    }

    /// The cache's generation (see [`NodeState`]): read it before deciding from the cache; if
    /// it is the same later, every node read meanwhile is what the cache holds then.
    pub fn generation(&self) -> u64 {
        read(&self.state).generation
    }

    /// Nodes cached, and nodes filed in the index (those with image annotations).
    pub fn sizes(&self) -> (usize, usize) {
        let state = read(&self.state);
        (state.nodes.len(), state.index.len())
    }
}

/// A poisoned lock only means a panic elsewhere mid-update; the state stays usable.
fn write(lock: &RwLock<NodeState>) -> std::sync::RwLockWriteGuard<'_, NodeState> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

fn read(lock: &RwLock<NodeState>) -> std::sync::RwLockReadGuard<'_, NodeState> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

/// Lists, then watches from the list's revision; relists when the watch's revision is too
/// old (410 Gone), resumes the watch after a timeout, backs off after errors.
struct Driver {
    client: Client,
    state: Arc<RwLock<NodeState>>,
    revision: watch::Sender<u64>,
    ready: Arc<AtomicBool>,
    health: Arc<WatchHealth>,
}

/// Why a watch ended.
enum Ended {
    /// The server closed it (its timeout): resume from the last revision.
    Resume,
    /// The revision is too old, or not a number: list again.
    Relist,
    /// An error: back off, then resume.
    Failed(NodeWatchError),
}

impl Driver {
    async fn run(self) {
        let mut retry = Retry::new();
        // When the cache last stopped following the API server (a watch ended or failed): the
        // start of a failing streak, so a watch that reconnects into a black hole counts as
        // failing from the moment it went silent, not from when the reconnect gives up.
        let mut down_since = Instant::now();
        loop {
            let mut from = match self.relist().await {
                Ok(revision) => revision,
                Err(e) => {
                    self.health.failed(down_since, &e);
                    retry.wait().await;
                    continue;
                }
            };
            loop {
                let ended = self.watch(&mut from).await;
                down_since = Instant::now();
                match ended {
                    Ended::Resume => {}
                    Ended::Relist => break,
                    Ended::Failed(e) => {
                        self.health.failed(down_since, &e);
                        retry.wait().await;
                    }
                }
            }
        }
    }

    /// Lists every node into a new state on the side and swaps it in: readers see the old
    /// nodes until the new list is complete. Returns the list's revision.
    async fn relist(&self) -> Result<u64, NodeWatchError> {
        let mut next = NodeState::default();
        let listed = live::list_nodes(&self.client, |page| {
            for meta in page {
                let node = NodeMeta::from_wire(meta, &mut next.interner, |_| true);
                next.index.upsert(&node);
                next.nodes
                    .insert(Arc::clone(node.shared_name()), Arc::new(node));
            }
        })
        .await?;
        let revision = listed
            .ok_or(NodeWatchError::NotServed)?
            .ok_or(NodeWatchError::Revision)?;
        let count = next.nodes.len();
        {
            let mut state = write(&self.state);
            next.generation = state.generation + 1;
            *state = next;
        }
        self.revision.send_replace(revision);
        crate::access::memory::return_free_memory();
        self.health.recovered("the list completed");
        if !self.ready.swap(true, Ordering::AcqRel) {
            tracing::info!(cache = "nodes", objects = count, revision, "cache synced");
        }
        Ok(revision)
    }

    /// One watch request from `from`, applying its events; `from` follows them.
    async fn watch(&self, from: &mut u64) -> Ended {
        let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
        let request =
            match kube::core::Request::new(NODES).watch_metadata(&params, &from.to_string()) {
                Ok(request) => request,
                Err(e) => return Ended::Failed(e.into()),
            };
        let started = tokio::time::timeout(
            WATCH_START_TIMEOUT,
            self.client.request_events::<WireNode>(request),
        );
        let stream = match started.await {
            Ok(Ok(stream)) => stream,
            Ok(Err(kube::Error::Api(s))) if s.code == 410 => return Ended::Relist,
            Ok(Err(e)) => return Ended::Failed(NodeWatchError::Api(e)),
            Err(_) => return Ended::Failed(NodeWatchError::StartTimeout),
        };
        // The API server accepted the watch: a failing streak is over.
        self.health.recovered("the watch was re-established");
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = match tokio::time::timeout(IDLE_LIMIT, stream.try_next()).await {
                Ok(Ok(Some(event))) => event,
                Ok(Ok(None)) => return Ended::Resume,
                Ok(Err(kube::Error::Api(s))) if s.code == 410 => return Ended::Relist,
                Ok(Err(e)) => return Ended::Failed(NodeWatchError::Api(e)),
                Err(_) => return Ended::Failed(NodeWatchError::Idle),
            };
            let revision = match &event {
                WatchEvent::Added(node)
                | WatchEvent::Modified(node)
                | WatchEvent::Deleted(node) => node.metadata.revision(),
                WatchEvent::Bookmark(b) => live::revision_of(Some(&b.metadata.resource_version)),
                WatchEvent::Error(e) if e.code == 410 => return Ended::Relist,
                WatchEvent::Error(e) => {
                    return Ended::Failed(NodeWatchError::Event {
                        code: e.code,
                        message: e.message.clone(),
                    });
                }
            };
            // A revision that is not a number can be neither resumed from nor fenced on.
            let Some(revision) = revision else {
                return Ended::Relist;
            };
            *from = revision;
            match event {
                WatchEvent::Added(node) | WatchEvent::Modified(node) => {
                    write(&self.state).upsert(node.metadata);
                }
                WatchEvent::Deleted(node) => {
                    write(&self.state).remove(&node.metadata.name.unwrap_or_default());
                }
                WatchEvent::Bookmark(_) | WatchEvent::Error(_) => {}
            }
            // Published after the change is applied: a reader that sees `revision` finds it.
            self.revision.send_if_modified(|r| {
                let newer = revision > *r;
                *r = (*r).max(revision);
                newer
            });
        }
    }
}
