//! A MachineOSConfig recreated for the hurt pool before anyone recovers it: MCO builds nothing
//! while the pool is NodeDegraded, and `recover` refuses the node (`poolTargetedNotPaused`: the
//! node controller would send a Done node straight back to the config's image) and writes
//! nothing. Paused as the refusal says, the node is recovered; the pool is then no longer
//! degraded, MCO builds the config's image, and once unpaused (as `--wait` says) the pool rolls
//! out that new image and ends Updated on it.

use std::time::Duration;

use super::*;
use testkit::mco::DESIRED_IMAGE;

const PAUSE: &str = r#"oc patch mcp worker --type=merge -p '{"spec":{"paused":true}}'"#;
const UNPAUSE: &str = r#"oc patch mcp worker --type=merge -p '{"spec":{"paused":false}}'"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_mosc_is_refused_until_the_pool_is_paused_then_the_pool_rolls_out_its_image() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("recreate MOSC worker");

    // Refused, with what to do, and nothing written (not by --apply either).
    assert_refused(&cluster, &stuck, "poolTargetedNotPaused", PAUSE).await;
    // MCO builds nothing for the pool while it is NodeDegraded.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let builds = mosbs_of(&cluster.client, "worker").await.expect("MOSBs");
    assert!(builds.is_empty(), "no build while degraded: {builds:?}");

    // Paused as the refusal says: recoverable; --apply --wait cancels and waits.
    set_paused(&cluster, true).await;
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    let recoverable = &plan.json()["recoverable"][0];
    assert_the_runbook_cancel(recoverable, &stuck);
    assert!(
        recoverable["why"].to_string().contains("which is paused"),
        "{recoverable:#}"
    );
    let running = start_recover(
        &cluster,
        &["--apply", "--wait", "--timeout", "3m", "-o", "json"],
    );
    let annotations = wait_node_back(&cluster, &stuck).await;
    assert_recorded_once(&cluster, &stuck, &annotations).await;

    // No longer degraded, so MCO builds the config's image; the paused pool sends it to no node.
    let build = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("the recreated MOSC's build, once the pool is not degraded");
    assert_ne!(build.image, stuck.image, "a new image");
    running
        .wait_for_stderr(UNPAUSE, STEP_TIMEOUT)
        .await
        .expect("--wait says how to unpause");
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await.expect("node");
        assert_eq!(a.get(DESIRED_IMAGE), None, "{node}: paused, not sent");
    }

    // Unpaused as --wait says: the rollout resumes, the run ends, the pool ends on the image.
    set_paused(&cluster, false).await;
    let run = running.finish().await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(
        report["pools"][0]["outcome"], "rolloutResumed",
        "{report:#}"
    );
    wait_rolled_out(&cluster, &build.image).await;
    assert_pool_healthy(&cluster, "worker").await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "recreated MOSC: refused, paused, recovered and rolled out in {:.2?}",
        started.elapsed()
    );
}

/// `kubectl patch mcp worker --type=merge -p '{"spec":{"paused":...}}'`: [`PAUSE`] and
/// [`UNPAUSE`] (`oc patch` is `kubectl patch`).
async fn set_paused(cluster: &Cluster, paused: bool) {
    let patch = json!({"spec": {"paused": paused}}).to_string();
    let said = if paused { PAUSE } else { UNPAUSE };
    assert!(said.ends_with(&format!("'{patch}'")), "{said} sets {patch}");
    let out = kubectl(
        cluster,
        ["patch", "mcp", "worker", "--type=merge", "-p", &patch],
    )
    .await;
    assert!(out.success(), "{out:?}");
}
