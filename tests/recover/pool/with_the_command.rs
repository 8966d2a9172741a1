//! `mosc-guard recover` on the report's scenario without the guard: the plan names the stuck
//! node as recoverable with the runbook's own cancel (its registry, asked as the node pulls,
//! says the image is gone) and writes nothing; `--apply --wait` brings
//! the node back through its daemon's no-op update (no reboot), and MCO's revert finishes the
//! pool. On 4.20 and on 4.22, whose `reason` texts differ (the command never reads them).

use super::*;
use testkit::release::Release;

async fn recovered_by_the_command(release: Release) {
    let started = std::time::Instant::now();
    let cluster = seed_on(release, SimConfig::real_timing()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    eprintln!("{release}: {} is stuck: {}", stuck.node, stuck.reason);

    // The plan: recoverable, the manual cancel's patch, nothing written.
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{release}: {plan:?}");
    let report = plan.json();
    assert_eq!(nodes_in(&report, "recoverable"), [stuck.node.as_str()]);
    for key in ["cancelled", "needsAttention", "outOfScope"] {
        assert_eq!(nodes_in(&report, key), Vec::<&str>::new(), "{key}");
    }
    assert_the_runbook_cancel(&report["recoverable"][0], &stuck);
    // Asked as the node pulls it, the registry says MCO deleted it.
    let registry = &report["recoverable"][0]["registry"];
    assert_eq!(registry["status"], "missing", "{report:#}");
    assert!(
        registry["why"]
            .as_str()
            .is_some_and(|w| w.contains("MANIFEST_UNKNOWN")),
        "{report:#}"
    );
    let text = recover(&cluster, &["worker"]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout
            .contains(&format!("RECOVERABLE node {} (pool worker)", stuck.node))
            && text.stdout.contains("Nothing was written"),
        "{text:?}"
    );
    assert_untouched(&cluster, &stuck).await;

    // --apply --wait: the node back with no reboot, the pool finished by MCO.
    let (_, report) = apply_and_wait(&cluster).await;
    let applied = &report["applied"][0];
    assert_eq!(
        (&applied["node"], &applied["outcome"]),
        (&Value::from(stuck.node.as_str()), &Value::from("recovered")),
        "{report:#}"
    );
    assert_eq!(applied["recorded"][DESIRED_IMAGE], stuck.image.as_str());
    assert_eq!(
        applied["registry"]["status"], "missing",
        "asked again before the patch"
    );
    assert_eq!(report["pools"][0]["pool"], "worker", "{report:#}");
    assert_eq!(report["pools"][0]["outcome"], "updated", "{report:#}");
    let annotations = wait_node_back(&cluster, &stuck).await;
    assert_recorded_once(&cluster, &stuck, &annotations).await;
    // MCO's revert: every worker on the pool's config without an image, the pool Updated.
    wait_pool_reverted(&cluster).await;
    assert_pool_healthy(&cluster, "worker").await;
    let out = kubectl(&cluster, ["get", "mcp", "worker"]).await;
    eprintln!("{}", out.stdout);

    // Run again: nothing to recover, nothing written.
    let again = recover(&cluster, &["--apply", "-o", "json"]).await;
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(again.json()["applied"], serde_json::json!([]), "{again:?}");
    assert_eq!(recovery_events(&cluster, &stuck).await, 1);
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "{release}: stuck and recovered by the command in {:.2?}",
        started.elapsed()
    );
}

/// 4.20: the report's release ("manifest unknown" in the reason).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_20_recover_apply_brings_the_stuck_node_back_and_mco_finishes_the_pool() {
    recovered_by_the_command(Release::V4_20).await;
}

/// 4.22: `failed to update OS to <image> after retries: ...`, the same plan and way back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_22_recover_apply_brings_the_stuck_node_back_and_mco_finishes_the_pool() {
    recovered_by_the_command(Release::V4_22).await;
}
