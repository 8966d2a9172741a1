//! Where the webhook gets its snapshots: the live caches, or a fixed snapshot read from
//! a directory (`serve --from-dir`, for trying a webhook configuration offline).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::snapshot::Snapshot;

/// A source of snapshots for admission decisions.
pub trait ClusterView: Send + Sync + 'static {
    /// What the caches hold now (cheap: reference counts only).
    fn cached(&self) -> Snapshot;

    /// Nodes and builds read fresh from the API server, other kinds from the cache;
    /// used to confirm an allow. An error means the guard cannot verify.
    fn fresh(&self) -> BoxFuture<'_, Result<Snapshot, String>>;

    /// True once every cache finished its first full list.
    fn ready(&self) -> bool;

    /// Objects per cache, for metrics.
    fn sizes(&self) -> Vec<(&'static str, usize)>;
}

/// A snapshot that never changes: fresh reads return it as it is.
pub struct StaticView(pub Arc<Snapshot>);

impl ClusterView for StaticView {
    fn cached(&self) -> Snapshot {
        self.0.as_ref().clone()
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
