//! Waiting for what MCO (the simulator), the API server and the guard do: a condition polled
//! until it holds ([`wait_for`]), an object gone ([`wait_gone`]), an Event, a build, a rollout,
//! a pool settled, reverted or degraded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject};

use super::cluster::{Build, Cluster, Rollout, STEP_TIMEOUT, lost_image_reason};
use super::read::{
    PoolCondition, events_about, mosbs_of, node_annotation, node_annotations, pool_condition,
    pool_conditions,
};
use crate::Result;
use crate::guard::Guard;
use crate::image_ref::ImageRef;
use crate::mco::{
    self, CURRENT_IMAGE, CURRENT_MOSB, DESIRED_IMAGE, REASON, STATE, STATE_DEGRADED, STATE_DONE,
    str_at,
};
pub use crate::poll::{wait_for, wait_gone};

/// Waits until at least one Event about the `kind` object `name` with `reason` exists
/// ([`events_about`]), and returns every such Event.
pub async fn wait_for_events_about(
    client: &kube::Client,
    kind: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<Vec<Event>> {
    wait_for(
        || async {
            let found = events_about(client, kind, name, reason).await;
            Ok((!found.is_empty()).then_some(found))
        },
        timeout,
        &format!("a {reason} Event about {kind} {name}"),
    )
    .await
}

/// Waits until MachineOSConfig `name` is gone, within [`STEP_TIMEOUT`]; panics otherwise.
pub async fn wait_mosc_gone(client: &kube::Client, name: &str) {
    let api: Api<DynamicObject> = mco::moscs(client);
    wait_gone(&api, name, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("MachineOSConfig {name} deleted: {e}"));
}

/// Waits until the MOSC's build succeeded and the MOSC points at its image.
pub async fn wait_for_build(client: &kube::Client, mosc: &str, timeout: Duration) -> Result<Build> {
    wait_for(
        || async {
            let Some(m) = mco::moscs(client).get_opt(mosc).await? else {
                return Ok(None);
            };
            // 4.20 names the current build by annotation only (no status.machineOSBuild).
            let current = m
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CURRENT_MOSB));
            let (Some(image), Some(name)) = (
                str_at(&m.data, &["status", "currentImagePullSpec"]),
                current.filter(|n| !n.is_empty()),
            ) else {
                return Ok(None);
            };
            let b = mco::mosbs(client).get_opt(name).await?;
            let built = |b: &DynamicObject| {
                mco::condition_true(b, "Succeeded")
                    && str_at(&b.data, &["status", "digestedImagePushSpec"]) == Some(image)
            };
            Ok(b.filter(built).map(|_| Build {
                mosb: name.to_owned(),
                image: image.to_owned(),
            }))
        },
        timeout,
        &format!("MachineOSBuild of {mosc} to succeed"),
    )
    .await
}

/// Waits until MCO (the simulator) deleted the build's image from the registry and the
/// MachineOSBuilds of MOSC `worker`.
pub async fn wait_image_and_builds_gone(cluster: &Cluster, image: &ImageRef) {
    wait_image_and_builds_of_gone(cluster, "worker", image).await;
}

/// Waits until MCO (the simulator) deleted the build's image from the registry and the
/// MachineOSBuilds of MOSC `mosc`.
pub async fn wait_image_and_builds_of_gone(cluster: &Cluster, mosc: &str, image: &ImageRef) {
    let digest = image.digest.clone().expect("image has a digest");
    let (registry, client) = (&cluster.registry, &cluster.client);
    wait_for(
        || async {
            let gone = registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            let builds = mosbs_of(client, mosc).await?;
            Ok((gone && builds.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        &format!("the image and the MachineOSBuilds of {mosc} to be deleted"),
    )
    .await
    .expect("image and builds deleted");
}

/// Waits until MCO (the simulator) has deleted `image` from the registry (it answers "manifest
/// unknown"); `what` names the wait in a timeout's message.
pub async fn wait_image_gone(cluster: &Cluster, image: &ImageRef, what: &str) {
    let digest = image.digest.clone().expect("image has a digest");
    wait_for(
        || async {
            let status = cluster
                .registry
                .manifest_status(&image.repo, &digest)
                .await?;
            Ok(status.map(|_| ()))
        },
        STEP_TIMEOUT,
        what,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Waits until pool `worker` reports NodeDegraded=True and returns that condition.
pub async fn wait_node_degraded(cluster: &Cluster) -> PoolCondition {
    wait_for(
        || async {
            Ok(pool_condition(&cluster.client, "worker", "NodeDegraded")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        "pool worker to report NodeDegraded=True",
    )
    .await
    .expect("pool degrades")
}

/// Waits until the rollout's node, released after MCO deleted its image, fails to pull it: the
/// node Degraded with the reason its release writes for the lost image
/// ([`lost_image_reason`]), pool worker NodeDegraded naming it, the other workers never
/// told to use the image. Returns the node's reason.
pub async fn wait_node_fails_pull(cluster: &Cluster, rollout: &Rollout) -> String {
    let degraded = wait_node_degraded(cluster).await;
    assert_eq!(
        degraded.reason,
        "1 nodes are reporting degraded status on sync"
    );
    assert!(degraded.message.contains(&rollout.node), "{degraded:?}");
    let annotations = node_annotations(&cluster.client, &rollout.node)
        .await
        .expect("read node");
    assert_eq!(
        annotations.get(STATE).map(String::as_str),
        Some(STATE_DEGRADED)
    );
    let reason = annotations.get(REASON).cloned().unwrap_or_default();
    assert_eq!(
        reason,
        lost_image_reason(cluster, &rollout.build.image),
        "{}'s reason",
        cluster.z_stream
    );
    for node in &cluster.nodes[1..] {
        assert_eq!(
            node_annotation(&cluster.client, node, DESIRED_IMAGE)
                .await
                .expect("read node"),
            None,
            "{node} was never told to use the image"
        );
    }
    reason
}

/// Waits until every worker is Done with annotations that satisfy `settled`, and the pool
/// reports Updated.
pub async fn wait_pool_settled(
    cluster: &Cluster,
    settled: impl Fn(&BTreeMap<String, String>) -> bool,
    what: &str,
) {
    wait_pool_settled_in(cluster, "worker", &cluster.nodes, settled, what).await;
}

/// Waits until each of `nodes` is Done with annotations that satisfy `settled`, and `pool`
/// reports Updated.
pub async fn wait_pool_settled_in(
    cluster: &Cluster,
    pool: &str,
    nodes: &[String],
    settled: impl Fn(&BTreeMap<String, String>) -> bool,
    what: &str,
) {
    let client = &cluster.client;
    let settled = &settled;
    wait_for(
        || async move {
            for node in nodes {
                let a = node_annotations(client, node).await?;
                if a.get(STATE).map(String::as_str) != Some(STATE_DONE) || !settled(&a) {
                    return Ok(None);
                }
            }
            Ok(pool_condition(client, pool, "Updated")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        what,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Waits until every worker runs `image` and the pool reports Updated.
pub async fn wait_rolled_out(cluster: &Cluster, image: &str) {
    wait_pool_settled(
        cluster,
        |a| a.get(CURRENT_IMAGE).map(String::as_str) == Some(image),
        "every worker to run the image and the pool to be Updated",
    )
    .await;
}

/// Waits until each of `nodes` runs `image` and `pool` reports Updated.
pub async fn wait_rolled_out_in(cluster: &Cluster, pool: &str, nodes: &[String], image: &str) {
    wait_pool_settled_in(
        cluster,
        pool,
        nodes,
        |a| a.get(CURRENT_IMAGE).map(String::as_str) == Some(image),
        &format!("every node of pool {pool} to run the image and the pool to be Updated"),
    )
    .await;
}

/// Waits until every worker is Done without image annotations (the pool left image mode and
/// its nodes rebased to the base OS image) and the pool reports Updated.
pub async fn wait_pool_reverted(cluster: &Cluster) {
    wait_pool_settled(
        cluster,
        |a| !a.contains_key(DESIRED_IMAGE) && !a.contains_key(CURRENT_IMAGE),
        "the pool to revert to the base OS image",
    )
    .await;
}

/// Waits until the guard's digest index holds exactly one node with an image (the rolling one),
/// so what follows is decided from its cache.
pub async fn wait_index_holds_the_rolling_node(guard: &Guard) {
    wait_for(
        || async {
            let text = guard.metrics().await?;
            Ok(text
                .contains("mosc_guard_cache_objects{cache=\"nodes_with_images\"} 1")
                .then_some(()))
        },
        STEP_TIMEOUT,
        "the guard's node index to hold the rolling node",
    )
    .await
    .expect("index current");
}

/// Records whether the pool ever reported Degraded or NodeDegraded while it runs.
pub struct DegradedWatch {
    seen: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl DegradedWatch {
    pub fn start(client: &kube::Client, pool: &'static str) -> Self {
        let (client, seen) = (client.clone(), Arc::new(AtomicBool::new(false)));
        let flag = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                if let Ok(conditions) = pool_conditions(&client, pool).await
                    && conditions
                        .iter()
                        .any(|(t, c)| (t == "Degraded" || t == "NodeDegraded") && c.is_true())
                {
                    flag.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { seen, task }
    }

    pub fn ever_degraded(&self) -> bool {
        self.seen.load(Ordering::SeqCst)
    }
}

impl Drop for DegradedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
