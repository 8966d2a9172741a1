//! The consistent-read floor: what the guard's confirming read costs the API server, measured by
//! the benchmark itself against the same API server, so a confirmed verdict can be compared
//! with the least any design that confirms by a consistent read could take.
//!
//! One sample makes the confirming read's requests exactly as `serve` makes them
//! (`access::caches`, `fresh_read`), from this process, all issued at once: the consistent lists
//! of MachineOSConfigs, MachineOSBuilds, pools, Machines and the ClusterVersion
//! (`access::live::decision_objects`) and the consistent one-node list whose resourceVersion is
//! the node fence (`access::live::node_revision`). When all have answered is **the floor**. A
//! sample also times the wait, after that, for a node watch to deliver a change or bookmark at or
//! past the fence's revision, as the guard's node cache must before its nodes may confirm
//! anything: **the fenced floor**. The watch is [`NodeFence`]: one kept open for the whole run,
//! as the guard's is. Left out: the admission round trip (the allow-all webhook's row measures
//! it) and the guard's decisions.

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use kube::api::WatchParams;
use kube::core::WatchEvent;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use mosc_guard::access::live;
use testkit::Result;

/// Bound on one floor sample (the guard's `--confirm-timeout` is 5 s).
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A node watch's event, decoded as far as the revision it carries.
#[derive(Clone, Deserialize)]
struct Revisioned {
    #[serde(default)]
    metadata: RevisionMeta,
}

#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RevisionMeta {
    resource_version: Option<String>,
}

/// The revision up to which a node watch has delivered every change: what the guard's node
/// cache tracks for its fence, without keeping the nodes.
pub struct NodeFence {
    revision: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl NodeFence {
    /// Starts watching nodes from the current revision.
    pub async fn start(client: &kube::Client) -> Result<Self> {
        let from = current_revision(client).await?;
        let (tx, revision) = watch::channel(from);
        let client = client.clone();
        let task = tokio::spawn(async move {
            let mut from = from;
            loop {
                match follow(&client, &tx, &mut from).await {
                    Ok(()) => {} // the server-side timeout: resume from the last revision
                    Err(e) => {
                        eprintln!("bench-cluster: node watch for the floor ended: {e}; resuming");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if let Ok(now) = current_revision(&client).await {
                            from = from.max(now);
                        }
                    }
                }
            }
        });
        Ok(Self { revision, task })
    }

    /// Waits until the watch has delivered every node change up to `revision`.
    async fn caught_up(&self, revision: u64) -> Result<()> {
        let mut rx = self.revision.clone();
        rx.wait_for(|seen| *seen >= revision).await?;
        Ok(())
    }
}

impl Drop for NodeFence {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn current_revision(client: &kube::Client) -> Result<u64> {
    live::node_revision(client)
        .await?
        .ok_or_else(|| "the nodes' resourceVersion is not a revision".into())
}

/// One watch request from `from`, raising `tx` with every event's and bookmark's revision.
async fn follow(client: &kube::Client, tx: &watch::Sender<u64>, from: &mut u64) -> Result<()> {
    let params = WatchParams::default().timeout(290);
    let request =
        kube::core::Request::new("/api/v1/nodes").watch_metadata(&params, &from.to_string())?;
    let mut events = std::pin::pin!(client.request_events::<Revisioned>(request).await?);
    while let Some(event) = events.try_next().await? {
        let rv = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.metadata.resource_version
            }
            WatchEvent::Bookmark(b) => Some(b.metadata.resource_version),
            WatchEvent::Error(e) => return Err(format!("watch error: {e:?}").into()),
        };
        if let Some(rv) = rv.and_then(|rv| rv.parse::<u64>().ok()) {
            *from = rv;
            tx.send_if_modified(|seen| {
                let raised = rv > *seen;
                *seen = (*seen).max(rv);
                raised
            });
        }
    }
    Ok(())
}

/// One floor sample (see the module doc): when the reads issued at once had all answered, and
/// when the node watch had also passed the fence.
pub struct Sample {
    pub reads: Duration,
    pub fenced: Duration,
}

/// One consistent read as a confirmation makes it (see the module doc).
pub async fn consistent_read(client: &kube::Client, nodes: &NodeFence) -> Result<Sample> {
    let started = Instant::now();
    let read = async {
        let (objects, revision) =
            tokio::join!(live::decision_objects(client), current_revision(client));
        objects?;
        let revision = revision?;
        let reads = started.elapsed();
        nodes.caught_up(revision).await?;
        Ok::<_, testkit::Error>(Sample {
            reads,
            fenced: started.elapsed(),
        })
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| format!("a consistent read took longer than {READ_TIMEOUT:?}"))?
}
