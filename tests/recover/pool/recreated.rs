//! A MachineOSConfig recreated for the hurt pool before anyone recovers it: MCO builds nothing
//! while the pool is NodeDegraded, so the config has no succeeded build for the pool's
//! configuration and MCO's node controller sends the pool's nodes no image
//! (`canLayeredContinue`). `recover` needs no pause: the node is recoverable, `--apply --wait`
//! brings it back, the pool is no longer degraded, MCO builds the config's image (a new one)
//! and `--wait` sees the rollout resume; the pool ends Updated on that image.

use super::*;
use testkit::mco::DESIRED_IMAGE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_mosc_whose_build_waits_needs_no_pause_and_the_pool_rolls_out_its_new_image() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("recreate MOSC worker");

    // MCO builds nothing for the pool while it is NodeDegraded (the pool says its update is
    // paused by the degraded condition), then plan.
    wait_pool_updating(&cluster, "False", "degraded condition").await;
    let builds = mosbs_of(&cluster.client, "worker").await.expect("MOSBs");
    assert!(builds.is_empty(), "no build while degraded: {builds:?}");
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    let recoverable = &plan.json()["recoverable"][0];
    assert_the_runbook_cancel(recoverable, &stuck);
    assert!(
        recoverable["why"]
            .to_string()
            .contains("targets pool worker but sends its nodes no image"),
        "{recoverable:#}"
    );

    // --apply --wait: the node back; the pool no longer degraded, so MCO builds the config's
    // image and rolls it out, and the wait ends once it resumed.
    // MCO may send the node the new image before the run's next look: recovered or moved on.
    let (_, report) = apply_and_wait(&cluster).await;
    let outcome = report["applied"][0]["outcome"].as_str().unwrap_or_default();
    assert!(["recovered", "movedOn"].contains(&outcome), "{report:#}");
    assert_eq!(
        report["pools"][0]["outcome"], "rolloutResumed",
        "{report:#}"
    );
    let annotations = node_annotations(&cluster.client, &stuck.node)
        .await
        .expect("node");
    assert_recorded_once(&cluster, &stuck, &annotations).await;
    let build = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("the recreated MOSC's build, once the pool is not degraded");
    assert_ne!(build.image, stuck.image, "a new image");
    wait_rolled_out(&cluster, &build.image).await;
    assert_pool_healthy(&cluster, "worker").await;
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await.expect("node");
        assert_eq!(a.get(DESIRED_IMAGE), Some(&build.image), "{node}");
    }
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "recreated MOSC: recovered without a pause and rolled out in {:.2?}",
        started.elapsed()
    );
}
