//! Cluster access: where the core's snapshots come from (the watch caches the webhook decides
//! from, direct reads that confirm an allow, directory dumps for `check --from-dir`), and what
//! `recover` and `prune` read from and write to a live cluster.

pub mod caches;
pub mod dump;
pub mod error;
pub mod live;
pub mod memory;
pub mod node_cache;
pub mod prune;
pub mod recovery;
pub mod registry;
pub mod view;
pub mod watch;
