//! The override annotation, the in-use policy, and the guard down (failurePolicy Fail).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn override_annotation_allows_the_deletion_with_a_warning() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let out = kubectl(
        cluster,
        [
            "annotate",
            "machineosconfig",
            "worker",
            "mosc-guard.dev/allow-deletion=node is being replaced",
        ],
    )
    .await;
    assert!(out.success(), "{out:?}");
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.check(&BIN, "worker", &["--output", "json"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json report");
    assert_eq!(report["overridden"], true, "{report}");
    assert_eq!(
        report["blockingNodes"][0]["node"],
        rollout.node.as_str(),
        "{report}"
    );

    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "override lets the delete through: {out:?}");
    assert!(
        out.stderr.contains("Warning: mosc-guard:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("node is being replaced"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&rollout.node), "{}", out.stderr);

    // What the override risked: MCO deletes the image (its builds' deletions stay refused, the
    // override covers only the config), then the node never gets it. Released only once the
    // image is gone, as in the report, so a slow MCO pass cannot let the node pull it first.
    let image = rollout.build.image_ref().expect("image reference");
    wait_image_gone(cluster, &image, "MCO to delete the image").await;
    cluster.sim.release(&rollout.node);
    let degraded = wait_node_degraded(cluster).await;
    assert!(
        degraded.message.contains("manifest unknown"),
        "{degraded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_guard_down_failure_policy_fail_refuses_the_delete() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    g.guard.stop();
    let out = kubectl(&g.cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr
            .contains("failed calling webhook \"deletions.mosc-guard.dev\""),
        "the API server's own error: {}",
        out.stderr
    );
    let out = kubectl(
        &g.cluster,
        ["get", "machineosconfig", "worker", "-o", "name"],
    )
    .await;
    assert!(out.success(), "the MOSC still exists: {out:?}");
    let CliRun { code, .. } = g.cluster.check(&BIN, "worker", &[]);
    assert_eq!(
        code,
        Some(1),
        "check still sees the danger without the webhook"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_use_policy_blocks_a_settled_pool_until_overridden() {
    let g = guarded(&BIN, SimConfig::real_timing(), &["--policy", "in-use"]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr
            .contains("3 nodes still need or run an image built from it (policy in-use)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        cluster.check(&BIN, "worker", &["--policy", "in-use"]).code,
        Some(1)
    );
    assert_eq!(
        cluster.check(&BIN, "worker", &[]).code,
        Some(0),
        "in-flight would allow it"
    );
    kubectl(
        cluster,
        [
            "annotate",
            "machineosconfig",
            "worker",
            "mosc-guard.dev/allow-deletion=leaving image mode",
        ],
    )
    .await;
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
}
