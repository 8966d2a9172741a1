//! The report's scenario on a real control plane, registry and the MCO 4.20 simulator:
//! create a MOSC for the worker pool, wait for the build and the first node to start updating,
//! delete the MOSC. Without mosc-guard the pool degrades with "manifest unknown".
//!
//! Each test starts its own control plane (a few seconds) and drops it at the end.

mod support;

use std::time::Duration;

use support::mco::{DESIRED_IMAGE, REASON, STATE, STATE_DEGRADED};
use support::scenario::{Cluster, node_annotation, node_annotations, pool_condition, wait_for};
use support::simulator::SimConfig;

/// Generous bound for each wait; a passing run needs a few seconds in total.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The shared per-test setup: a cluster with a 3-node `worker` pool and a simulator whose
/// daemons give up on a missing image after ~1 s (MCO: ~75 s).
async fn seed() -> Cluster {
    let sim = SimConfig {
        pull_delay: Duration::from_millis(200),
        pull_retries: 3,
        retry_interval: Duration::from_millis(200),
        poll_interval: Duration::from_millis(100),
        build_delay: Duration::from_millis(300),
    };
    Cluster::seed(3, sim).await.expect("seed cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unguarded_deletion_degrades_pool() {
    let started = std::time::Instant::now();
    let cluster = seed().await;
    let client = &cluster.client;

    // Steps 1-3: MOSC created, build succeeded, first node mid-update to the new image (held).
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let image = rollout.build.image_ref().expect("digested image reference");
    let digest = image.digest.clone().expect("image has a digest");

    // Step 4: delete the MOSC at once. Nothing stops it.
    let out = cluster
        .cp
        .kubectl(["delete", "machineosconfig", "worker"])
        .await
        .expect("run kubectl delete");
    assert!(
        out.success(),
        "kubectl delete machineosconfig failed: {}",
        out.stderr
    );

    // MCO 4.20 deletes every image of the MOSC's builds, in use or not, and the builds.
    let registry = &cluster.registry;
    wait_for(
        || async {
            let gone = registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            let builds = support::scenario::mosbs_of(client, "worker").await?;
            Ok((gone && builds.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "the simulator to delete the build's image and the MachineOSBuild",
    )
    .await
    .expect("image and build deleted");

    // The node mid-update keeps desiredImage = the deleted image; its daemon now fails to pull it.
    assert_eq!(
        node_annotation(client, &rollout.node, DESIRED_IMAGE)
            .await
            .expect("read node"),
        Some(rollout.build.image.clone()),
        "a node mid-update keeps its desiredImage in 4.20"
    );
    cluster.sim.release(&rollout.node);

    let degraded = wait_for(
        || async {
            Ok(pool_condition(client, "worker", "NodeDegraded")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        "pool worker to report NodeDegraded=True",
    )
    .await
    .expect("pool degrades");
    assert_eq!(
        degraded.reason,
        "1 nodes are reporting degraded status on sync"
    );
    assert!(
        degraded.message.contains("manifest unknown"),
        "{degraded:?}"
    );

    let annotations = node_annotations(client, &rollout.node)
        .await
        .expect("read node");
    assert_eq!(
        annotations.get(STATE).map(String::as_str),
        Some(STATE_DEGRADED)
    );
    let reason = annotations.get(REASON).cloned().unwrap_or_default();
    assert!(reason.contains("manifest unknown"), "reason: {reason}");
    assert!(
        reason.starts_with(&format!(
            "error running rpm-ostree rebase --experimental ostree-unverified-registry:{}",
            rollout.build.image
        )),
        "reason: {reason}"
    );
    assert!(
        reason.contains(&format!(
            "reading manifest {digest} in {}",
            image.repository()
        )),
        "reason: {reason}"
    );

    // The other workers were never told to use the image and stay on the base OS.
    for node in &cluster.nodes[1..] {
        assert_eq!(
            node_annotation(client, node, DESIRED_IMAGE)
                .await
                .expect("read node"),
            None,
            "{node}"
        );
    }
    // As an admin sees it.
    let out = cluster
        .cp
        .kubectl([
            "get",
            "mcp",
            "worker",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="NodeDegraded")].status} {.status.degradedMachineCount}"#,
        ])
        .await
        .expect("run kubectl get mcp");
    assert_eq!(
        out.stdout.trim(),
        "True 1",
        "kubectl get mcp: {}",
        out.stderr
    );
    cluster
        .cp
        .kubectl(["get", "mcp,mosc,mosb"])
        .await
        .expect("run kubectl get");
    eprintln!(
        "unguarded_deletion_degrades_pool took {:.2?}",
        started.elapsed()
    );
}
