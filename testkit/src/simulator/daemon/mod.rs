//! The machine-config-daemon of every node, as MCO's (pkg/daemon, release-4.20): each pass
//! ([`plan`]) compares what the node is told to run (desiredConfig, desiredImage) with what its
//! machine runs ([`plan::Disk`]) and carries out an update ([`update`]): Working, drained through
//! the drain controller ([`super::drain`]), the image pulled from the registry ([`rebase`]),
//! rebooted (a new bootID), uncordoned and Done. A failed rebase leaves the node cordoned and
//! Degraded with the played release's reason ([`crate::release::RebaseReason`]), and the daemon tries
//! again after a back-off, re-reading the annotations every pass, without setting Working; a
//! target cancelled by hand (desiredImage back to currentImage, desiredConfig to currentConfig)
//! makes the next pass uncordon the node and report Done with no reboot.
//!
//! A held daemon ([`super::Simulator::hold`]) may start an update (Working, the drain) and then
//! waits before it changes anything else. When a node's next pass may run is its daemon's work
//! queue's to say ([`queue`]): every node event and every failed pass push it further away.

mod plan;
mod queue;
mod rebase;
mod update;

pub use rebase::rpm_ostree_error;
pub(super) use rebase::{Pull, pull};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use tokio::task::JoinSet;

use super::ctx::Ctx;
use super::reconcile::Reconciler;
use crate::Result;
use crate::mco::{self, CURRENT_CONFIG, CURRENT_IMAGE, node_annotation};
use plan::{Disk, Pass};
use queue::NodeQueue;
use update::Outcome;

/// What each node's machine runs, by node uid (the daemon's on-disk state).
#[derive(Clone, Default)]
pub(super) struct Disks(Arc<Mutex<HashMap<String, Disk>>>);

impl Disks {
    /// What `node`'s machine runs: as last recorded, or (first seen) as its annotations say.
    fn of(&self, node: &Node) -> Disk {
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let mut disks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        disks
            .entry(uid)
            .or_insert_with(|| Disk {
                config: node_annotation(node, CURRENT_CONFIG)
                    .unwrap_or_default()
                    .to_owned(),
                image: node_annotation(node, CURRENT_IMAGE).map(str::to_owned),
            })
            .clone()
    }

    /// Records what `node`'s machine runs once an update staged it.
    fn set(&self, node: &Node, disk: Disk) {
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let mut disks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        disks.insert(uid, disk);
    }
}

/// Runs one pass per node at a time, each as its own task (a pass waits for drains and pulls).
pub(super) struct Daemons {
    ctx: Ctx,
    disks: Disks,
    /// Running pass -> node.
    running: HashMap<tokio::task::Id, String>,
    // Dropping the set (when the loop is aborted) aborts the running passes.
    tasks: JoinSet<(String, Result<Outcome>)>,
    /// Each node's place in its daemon's work queue.
    queues: HashMap<String, NodeQueue>,
}

impl Daemons {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            disks: Disks::default(),
            running: HashMap::new(),
            tasks: JoinSet::new(),
            queues: HashMap::new(),
        }
    }

    /// The rate limiter's base and cap.
    fn limits(&self) -> (Duration, Duration) {
        let delays = self.ctx.node_delays();
        (delays.queue_base, delays.queue_cap)
    }

    fn finished(&mut self, name: String, result: Result<Outcome>) {
        let (base, cap) = self.limits();
        let queue = self.queues.entry(name.clone()).or_default();
        match result {
            Ok(Outcome::Progressed) => queue.forget(),
            failed => {
                if let Err(e) = failed {
                    tracing::warn!("sim daemon {name}: {e} (will retry)");
                }
                queue.add_rate_limited(Instant::now(), base, cap);
            }
        }
    }
}

impl Reconciler for Daemons {
    async fn sync(&mut self) -> Result<()> {
        while let Some(done) = self.tasks.try_join_next_with_id() {
            match done {
                Ok((id, (name, result))) => {
                    self.running.remove(&id);
                    self.finished(name, result);
                }
                Err(e) => {
                    self.running.remove(&e.id());
                }
            }
        }
        let nodes = self.ctx.list(&mco::nodes(&self.ctx.client)).await?;
        let configs: HashSet<String> = self
            .ctx
            .list(&mco::mcs(&self.ctx.client))
            .await?
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        let now = Instant::now();
        let (base, cap) = self.limits();
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let queue = self.queues.entry(name.clone()).or_default();
            queue.observe(node.metadata.resource_version.as_deref(), now, base, cap);
            if mco::is_windows(&node)
                || node_annotation(&node, CURRENT_CONFIG).is_none()
                || self.running.values().any(|n| *n == name)
                || !queue.ready(now)
            {
                continue;
            }
            queue.take();
            let disk = self.disks.of(&node);
            let pass = plan::plan(&node, &disk, |c| configs.contains(c));
            if matches!(pass, Pass::Idle | Pass::AwaitDrain) {
                // The sync found nothing to do: `Forget`.
                queue.forget();
                continue;
            }
            let (ctx, disks, task_name) = (self.ctx.clone(), self.disks.clone(), name.clone());
            let handle = self.tasks.spawn(async move {
                let result = update::run(&ctx, &disks, &node, pass).await;
                (task_name, result)
            });
            self.running.insert(handle.id(), name);
        }
        Ok(())
    }

    fn waiting(&self) -> bool {
        !self.tasks.is_empty() || self.queues.values().any(NodeQueue::queued)
    }
}
