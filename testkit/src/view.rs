//! A scripted [`ClusterView`] for in-process webhooks and engines: what its caches hold,
//! which nodes they hand out, and what its confirming fresh read does (return the cluster, fail,
//! hang, take its time), counting the reads.
//!
//! ```ignore
//! // A cache that lags behind the cluster: empty, while the fresh read finds the node.
//! let view = ScriptedView::empty().fresh(FreshRead::Listed(cluster()));
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use mosc_guard::access::error::{FreshError, NotReady};
use mosc_guard::access::live::LiveError;
use mosc_guard::access::view::{ClusterView, Fresh, FreshNodes};
use mosc_guard::core::node::NodeMeta;
use mosc_guard::core::policy::PolicyMode;
use mosc_guard::core::snapshot::Snapshot;

/// Which cached nodes may carry one of the digests under a mode (see [`ClusterView::nodes`]).
pub type NodesFn =
    dyn Fn(Option<&BTreeSet<String>>, PolicyMode) -> Vec<Arc<NodeMeta>> + Send + Sync;

/// What a confirming fresh read of a [`ScriptedView`] returns.
pub enum FreshRead {
    /// The cached objects, with nodes from the node cache (its fence passed).
    Cached,
    /// This cluster, read now: its objects, and its nodes listed.
    Listed(Snapshot),
    /// This error (the guard cannot verify).
    Fails(FreshError),
    /// Never answers.
    Hangs,
}

impl FreshRead {
    /// A read of the API server that failed with `message` (e.g. `connection refused`).
    pub fn fails(message: &str) -> Self {
        Self::Fails(FreshError::from(LiveError::Task(message.to_owned())))
    }
}

/// A [`ClusterView`] that is always ready and reports no sizes. By default its caches are
/// empty and its fresh read returns them ([`FreshRead::Cached`]) at once.
pub struct ScriptedView {
    cached: Snapshot,
    nodes: Box<NodesFn>,
    fresh: FreshRead,
    fresh_delay: Duration,
    reads: Arc<AtomicUsize>,
}

impl ScriptedView {
    /// Empty caches.
    pub fn empty() -> Self {
        Self::cached(Snapshot::default())
    }

    /// Caches holding `objects`, handing out all of its nodes for any digests.
    pub fn cached(objects: Snapshot) -> Self {
        let nodes = objects.nodes.clone();
        Self {
            cached: objects,
            nodes: Box::new(move |_, _| nodes.clone()),
            fresh: FreshRead::Cached,
            fresh_delay: Duration::ZERO,
            reads: Arc::default(),
        }
    }

    /// Cached nodes come from `nodes` (e.g. a digest index, as the node cache hands them out).
    pub fn nodes_from(
        mut self,
        nodes: impl Fn(Option<&BTreeSet<String>>, PolicyMode) -> Vec<Arc<NodeMeta>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.nodes = Box::new(nodes);
        self
    }

    /// What the fresh read returns.
    pub fn fresh(mut self, read: FreshRead) -> Self {
        self.fresh = read;
        self
    }

    /// How long each fresh read takes before it returns.
    pub fn fresh_delay(mut self, delay: Duration) -> Self {
        self.fresh_delay = delay;
        self
    }

    /// The number of fresh reads started so far (shared: read it after the view moved into a
    /// server).
    pub fn reads(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.reads)
    }
}

impl ClusterView for ScriptedView {
    fn objects(&self) -> Snapshot {
        Snapshot {
            nodes: Vec::new(),
            ..self.cached.clone()
        }
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        (self.nodes)(digests, mode)
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if !self.fresh_delay.is_zero() {
                tokio::time::sleep(self.fresh_delay).await;
            }
            match &self.fresh {
                FreshRead::Cached => Ok(Fresh {
                    objects: self.objects(),
                    nodes: FreshNodes::Cached,
                    ..Fresh::default()
                }),
                FreshRead::Listed(s) => Ok(Fresh {
                    objects: Snapshot {
                        nodes: Vec::new(),
                        ..s.clone()
                    },
                    nodes: FreshNodes::Listed(s.nodes.clone()),
                    ..Fresh::default()
                }),
                FreshRead::Fails(e) => Err(e.clone()),
                FreshRead::Hangs => std::future::pending().await,
            }
        })
    }

    fn readiness(&self) -> Result<(), NotReady> {
        Ok(())
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}
