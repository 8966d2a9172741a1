//! The runbook's manual procedure: the image lost where the node pulls it (`mosc-guard images`,
//! step 1), then one `kubectl patch node --type=json` cancelling the failed target, conditional
//! on what was read (`test` operations), proves the way back MCO's own daemon takes (facts: "A
//! node the bug already hurt, and the way back").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use testkit::mco::{CURRENT_CONFIG, STATE, STATE_WORKING};
use testkit::release::Release;

/// The MachineConfig change made while the node is stuck.
const R2: &str = "rendered-worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// Every distinct state a node's annotation went through, polled every 50 ms.
struct StateLog {
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StateLog {
    fn start(cluster: &Cluster, node: &str) -> Self {
        let (client, node) = (cluster.client.clone(), node.to_owned());
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                if let Ok(Some(state)) = node_annotation(&client, &node, STATE).await {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    if log.last() != Some(&state) {
                        log.push(state);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { seen, task }
    }

    fn states(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for StateLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The report's scenario without the guard on `release`, then the way back by hand.
async fn stuck_then_cancelled_by_hand(release: Release) {
    let started = std::time::Instant::now();
    let cluster = seed_on(release, SimConfig::real_timing()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    // Degraded with the release's reason, cordoned, drained; the pool NodeDegraded.
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    eprintln!("{release}: {} is stuck: {}", stuck.node, stuck.reason);

    // It stays so: its daemon tries again and again, re-reading the node, never Working.
    let log = StateLog::start(&cluster, &stuck.node);
    let failed = cluster.sim.failed_updates(&stuck.node);
    wait_for(
        || async { Ok((cluster.sim.failed_updates(&stuck.node) >= failed + 2).then_some(())) },
        STEP_TIMEOUT,
        "two more failed passes of the stuck node's daemon",
    )
    .await
    .expect("the daemon retries");

    // A MachineConfig change reaches no node: the stuck one uses maxUnavailable.
    render_pool(&cluster, "worker", R2)
        .await
        .expect("render R2");
    assert_pool_frozen(
        &cluster,
        &stuck,
        &cluster.nodes[1..],
        R2,
        Duration::from_secs(3),
    )
    .await;
    let states = log.states();
    assert!(
        !states.iter().any(|s| s == STATE_WORKING),
        "{release}: a retrying Degraded node never goes Working: {states:?}"
    );
    drop(log);

    // Runbook step 1: the image is lost where and as the node pulls it (`mosc-guard images`).
    let images = BIN
        .cli()
        .args(["images", "-o", "json"])
        .kubeconfig(cluster.cp.kubeconfig())
        .run_async()
        .await;
    assert_eq!(images.code, Some(1), "{release}: {images:?}");
    let report = images.json();
    let listed = report["images"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["image"] == stuck.image.as_str()))
        .unwrap_or_else(|| panic!("{release}: the stuck node's image listed: {report:#}"));
    assert_eq!(listed["status"], "missing", "{release}: {listed:#}");
    assert_eq!(
        listed["neededBy"][0]["node"],
        stuck.node.as_str(),
        "{listed:#}"
    );

    // The hand cancel. The node controller is held for a moment so the node is seen Done
    // before it is sent to R2 (its next update).
    cluster.sim.hold_pool("worker");
    let out = cancel_target_by_hand(&cluster, &stuck).await;
    assert!(out.success(), "{release}: the cancel: {out:?}");
    wait_node_back(&cluster, &stuck).await;
    // Run again, the same patch fails on its `test` operations and writes nothing.
    let before = node_annotations(&cluster.client, &stuck.node)
        .await
        .expect("node");
    let again = cancel_target_by_hand(&cluster, &stuck).await;
    assert!(
        !again.success(),
        "{release}: a second cancel must fail: {again:?}"
    );
    assert_eq!(
        node_annotations(&cluster.client, &stuck.node)
            .await
            .expect("node"),
        before,
        "{release}: the failed patch changed nothing"
    );

    // Liveness: the pool's change now reaches every node, and the pool is Updated.
    cluster.sim.release_pool("worker");
    wait_pool_settled(
        &cluster,
        |a| a.get(CURRENT_CONFIG).map(String::as_str) == Some(R2),
        "every worker on R2 and the pool Updated",
    )
    .await;
    let conditions = pool_conditions(&cluster.client, "worker")
        .await
        .expect("pool");
    for type_ in ["NodeDegraded", "Degraded"] {
        assert_eq!(
            conditions.get(type_).map(|c| c.status.as_str()),
            Some("False"),
            "{release}: {type_}"
        );
    }
    let out = kubectl(&cluster, ["get", "mcp", "worker"]).await;
    eprintln!("{}", out.stdout);
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "{release}: stuck and back by hand in {:.2?}",
        started.elapsed()
    );
}

/// 4.20: rpm-ostree's "manifest unknown" in the reason, as the report shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_20_a_hand_cancel_brings_the_stuck_node_back_and_unfreezes_the_pool() {
    stuck_then_cancelled_by_hand(Release::V4_20).await;
}

/// 4.22: the reason is `failed to update OS to <image> after retries: ...`; the way back is the
/// same (decided from the objects, never from the text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_22_a_hand_cancel_brings_the_stuck_node_back_and_unfreezes_the_pool() {
    stuck_then_cancelled_by_hand(Release::V4_22).await;
}
