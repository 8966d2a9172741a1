//! Where the webhook gets its snapshots: the live caches, or a fixed snapshot read from
//! a directory (`serve --from-dir`, for trying a webhook configuration offline).

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::access::error::{FreshError, NotReady};
use crate::core::node::NodeMeta;
use crate::core::policy::{self, Deletion, PolicyMode, Verdict};
use crate::core::snapshot::Snapshot;

/// A source of snapshots for admission decisions.
pub trait ClusterView: Send + Sync + 'static {
    /// What the caches hold now, without nodes (cheap: reference counts only).
    fn objects(&self) -> Snapshot;

    /// Cached nodes that may carry one of `digests` under `mode` (a superset of the nodes
    /// that can block), or every node when `digests` is `None`.
    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>>;

    /// Cached nodes that have not reached their desired image (and any whose images the index
    /// could not read): a superset of the nodes that can be stuck on a lost image, for
    /// `serve`'s gauge. Every node by default.
    fn unreached_nodes(&self) -> Vec<Arc<NodeMeta>> {
        self.nodes(None, PolicyMode::InFlight)
    }

    /// Builds, pools and MachineOSConfigs read fresh from the API server, and nodes at least as
    /// fresh; used to confirm an allow. An error means the guard cannot verify.
    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>>;

    /// A number that changes whenever the cached nodes do (the node cache's generation): equal
    /// before and after means every node read in between is what the cache holds. `None`
    /// where the view cannot tell (then nothing is concluded from it).
    fn node_generation(&self) -> Option<u64> {
        None
    }

    /// Whether the webhook should receive requests (`/readyz`): every cache finished its first
    /// full list (synced), and no watch has been failing for longer than allowed. `Err` says
    /// why not, naming the caches.
    fn readiness(&self) -> Result<(), NotReady>;

    /// Whether every cache finished its first full list (a stale cache is still synced).
    fn synced(&self) -> bool {
        !matches!(self.readiness(), Err(NotReady::Unsynced(_)))
    }

    /// Each cache and whether it is stale (its watch failing for longer than allowed).
    fn stale(&self) -> Vec<(&'static str, bool)> {
        Vec::new()
    }

    /// Objects per cache, for metrics.
    fn sizes(&self) -> Vec<(&'static str, usize)>;
}

/// What a verdict from the caches was decided on: the objects' versions, and the node cache's
/// generation read before its nodes were.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Basis {
    pub objects: crate::core::snapshot::Versions,
    pub nodes: u64,
}

/// A confirming read: everything a decision reads, at least as recent as the moment the read
/// started.
#[derive(Debug, Default)]
pub struct Fresh {
    /// Builds, pools and MachineOSConfigs listed now (no nodes).
    pub objects: Snapshot,
    pub nodes: FreshNodes,
    /// How long its steps took (for the metrics; zero where a view does not time them).
    pub steps: ReadSteps,
}

/// The steps of a confirming read, each from the read's start, as the caches time them: the
/// consistent lists of the objects, the node collection's revision (the fence), the node cache
/// reaching it, and a list of every node when the cache was late.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadSteps {
    pub lists: std::time::Duration,
    pub revision: std::time::Duration,
    /// From the revision's arrival to the node cache applying it (`None`: it did not within
    /// the fence wait, or the revision was not one).
    pub catch_up: Option<std::time::Duration>,
    /// How long the list of every node took, when one answered.
    pub node_list: Option<std::time::Duration>,
}

/// Where a confirming read's nodes are.
#[derive(Debug, Default)]
pub enum FreshNodes {
    /// In the view's node cache, which has applied every node change committed before the read
    /// started (the fence, see [`crate::access::node_cache`]): read them with [`ClusterView::nodes`].
    #[default]
    Cached,
    /// Listed now.
    Listed(Vec<Arc<NodeMeta>>),
}

impl Fresh {
    /// The verdict on `target` from this read: over the nodes it listed, or, when the node
    /// cache passed the fence, as the cached verdict is decided (`policy::evaluate_indexed`):
    /// from the digest index's candidates, so a refusal by a node is decided from the nodes
    /// the deletion's images name, and an allow the index proves has no candidate reads none.
    pub fn decide<V: ClusterView + ?Sized>(
        &self,
        view: &V,
        target: Deletion<'_>,
        mode: PolicyMode,
    ) -> Verdict {
        match &self.nodes {
            FreshNodes::Listed(nodes) => {
                let mut snapshot = self.objects.clone();
                snapshot.nodes = nodes.clone();
                policy::evaluate(&snapshot, target, mode)
            }
            FreshNodes::Cached => {
                policy::evaluate_indexed(&self.objects, target, mode, |digests| {
                    view.nodes(digests, mode)
                })
            }
        }
    }

    /// Whether this read shows exactly what `basis` was decided on: the same objects (by
    /// version) and, its node cache past the fence, the same cached nodes (by generation,
    /// read now). Then a verdict decided on the basis is the verdict on this read.
    pub fn shows<V: ClusterView + ?Sized>(&self, basis: &Basis, view: &V) -> bool {
        matches!(self.nodes, FreshNodes::Cached)
            && self.objects.versions().as_ref() == Some(&basis.objects)
            && view.node_generation() == Some(basis.nodes)
    }

    /// Bounded label for metrics.
    pub fn source(&self) -> &'static str {
        match self.nodes {
            FreshNodes::Cached => "cache",
            FreshNodes::Listed(_) => "list",
        }
    }
}

/// `--openshift-version`: `inner`'s snapshots, cached and fresh, say this release whatever the
/// cluster (or the dump) says. The one place `serve` applies the override, whichever source
/// serves; `check` applies the same [`Snapshot::with_release_override`] to what it read.
pub struct ReleaseOverride<V> {
    inner: V,
    version: Option<String>,
}

impl<V: ClusterView> ReleaseOverride<V> {
    /// `inner` deciding with `version`'s rules (`None`: as the cluster says).
    pub fn new(inner: V, version: Option<String>) -> Self {
        Self { inner, version }
    }
}

impl<V: ClusterView> ClusterView for ReleaseOverride<V> {
    fn objects(&self) -> Snapshot {
        self.inner
            .objects()
            .with_release_override(self.version.as_deref())
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        self.inner.nodes(digests, mode)
    }

    fn unreached_nodes(&self) -> Vec<Arc<NodeMeta>> {
        self.inner.unreached_nodes()
    }

    fn node_generation(&self) -> Option<u64> {
        self.inner.node_generation()
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        Box::pin(async move {
            let mut fresh = self.inner.fresh().await?;
            fresh.objects =
                std::mem::take(&mut fresh.objects).with_release_override(self.version.as_deref());
            Ok(fresh)
        })
    }

    fn readiness(&self) -> Result<(), NotReady> {
        self.inner.readiness()
    }

    fn stale(&self) -> Vec<(&'static str, bool)> {
        self.inner.stale()
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        self.inner.sizes()
    }
}

/// A snapshot that never changes: fresh reads return it as it is.
pub struct StaticView(pub Arc<Snapshot>);

impl ClusterView for StaticView {
    fn objects(&self) -> Snapshot {
        Snapshot {
            nodes: Vec::new(),
            ..self.0.as_ref().clone()
        }
    }

    fn nodes(&self, _: Option<&BTreeSet<String>>, _: PolicyMode) -> Vec<Arc<NodeMeta>> {
        self.0.nodes.clone()
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        Box::pin(std::future::ready(Ok(Fresh {
            objects: self.objects(),
            nodes: FreshNodes::Listed(self.0.nodes.clone()),
            ..Fresh::default()
        })))
    }

    fn readiness(&self) -> Result<(), NotReady> {
        Ok(())
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        let s = &self.0;
        vec![
            ("machineosconfigs", s.machine_os_configs.len()),
            ("machineosbuilds", s.machine_os_builds.len()),
            ("machineconfigpools", s.pools.len()),
            ("nodes", s.nodes.len()),
        ]
    }
}

#[cfg(test)]
mod tests;
