//! Where the webhook gets its snapshots: the live caches, or a fixed snapshot read from
//! a directory (`serve --from-dir`, for trying a webhook configuration offline).

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::model::NodeMeta;
use crate::policy::PolicyMode;
use crate::snapshot::Snapshot;

/// A source of snapshots for admission decisions.
pub trait ClusterView: Send + Sync + 'static {
    /// What the caches hold now, without nodes (cheap: reference counts only).
    fn objects(&self) -> Snapshot;

    /// Cached nodes that may carry one of `digests` under `mode` (a superset of the nodes
    /// that can block), or every node when `digests` is `None`.
    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>>;

    /// Nodes and builds read fresh from the API server, other kinds from the cache;
    /// used to confirm an allow. An error means the guard cannot verify.
    fn fresh(&self) -> BoxFuture<'_, Result<Snapshot, String>>;

    /// True once every cache finished its first full list (synced).
    fn ready(&self) -> bool;

    /// Whether the webhook should receive requests (`/readyz`): synced, and no watch failing
    /// for longer than allowed. `Err` says why not, naming the caches.
    fn readiness(&self) -> Result<(), String> {
        if self.ready() {
            Ok(())
        } else {
            Err("caches have not finished their first full list".to_string())
        }
    }

    /// Each cache and whether it is stale (its watch failing for longer than allowed).
    fn stale(&self) -> Vec<(&'static str, bool)> {
        Vec::new()
    }

    /// Objects per cache, for metrics.
    fn sizes(&self) -> Vec<(&'static str, usize)>;
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

    fn fresh(&self) -> BoxFuture<'_, Result<Snapshot, String>> {
        Box::pin(async move { Ok(self.0.as_ref().clone()) })
    }

    fn ready(&self) -> bool {
        true
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        sizes_of(&self.0)
    }
}

/// Object counts of a snapshot, labelled as the metrics expect.
pub fn sizes_of(s: &Snapshot) -> Vec<(&'static str, usize)> {
    vec![
        ("machineosconfigs", s.machine_os_configs.len()),
        ("machineosbuilds", s.machine_os_builds.len()),
        ("machineconfigpools", s.pools.len()),
        ("nodes", s.nodes.len()),
    ]
}
