//! What the registry says decides the cancel (issue 37, item 4). The stuck node's image is asked
//! for where and as a node pulls it (the registry behind TLS and token auth, the
//! ControllerConfig's pull secret and CA, the mirror set):
//! - **available**: the builds are gone but the registry serves the image again (restored from
//!   a backup, as the runbook's "restore the tag" does): not cancelled, exit 1, the reason; and
//!   once the daemon's next retry runs it pulls the image and the node heals by itself;
//! - **unknown**: the registry cannot be asked (it is down): a person decides, nothing written;
//!   with `--image-loss-verified` the admin has verified the loss: recoverable, and the plan says
//!   the registry did not verify it;
//! - **served again between the plan and the patch**: two pools stuck, `--apply` patches the
//!   first node; while it waits for that node, the second node's image is restored: its re-plan
//!   asks the registry again and stops, nothing written to it.
//!
//! (Missing, the registry's `MANIFEST_UNKNOWN` after MCO deleted the image, is every other
//! story's case.)

use super::*;
use testkit::mco::{STATE, STATE_DEGRADED};
use testkit::registry_client::ManifestCopy;
use testkit::scenario::Rollout;

/// Starts the layered rollout of `pool` with `node` held mid-update, keeps a copy of its image,
/// and loses the image as the report does; the stuck node and the copy.
async fn lose_keeping_a_copy(cluster: &Cluster, pool: &str, node: &str) -> (Stuck, ManifestCopy) {
    let rollout: Rollout = cluster
        .start_rollout(pool, node, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{pool}: the layered rollout starts: {e}"));
    let image = rollout.build.image_ref().expect("image reference");
    let digest = image.digest.as_deref().expect("a digest");
    let copy = cluster
        .registry
        .copy_manifest(&image.repo, digest)
        .await
        .expect("a copy of the image's manifest");
    (lose_the_rollouts_image(cluster, pool, &rollout).await, copy)
}

/// The registry's `status` for the first entry of `key` in a `recover -o json` report.
fn registry_status<'r>(report: &'r Value, key: &str) -> &'r Value {
    &report[key][0]["registry"]["status"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_the_registry_still_serves_is_not_cancelled_and_the_daemons_retry_heals_the_node()
{
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let (stuck, copy) = lose_keeping_a_copy(&cluster, "worker", &cluster.nodes[0]).await;

    // MCO deleted it: the registry says missing, recoverable.
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(registry_status(&plan.json(), "recoverable"), "missing");

    // Restored from a backup while the daemon waits for its next retry (held, so that the
    // retry does not run before the plan): served, never cancelled.
    cluster.sim.hold(&stuck.node);
    cluster.registry.restore(&copy).await.expect("restore");
    assert_refused(&cluster, &stuck, "imageStillServed", "do not cancel").await;
    let plan = recover(&cluster, &["-o", "json"]).await;
    let report = plan.json();
    assert_eq!(registry_status(&report, "needsAttention"), "available");
    let why = report["needsAttention"][0]["why"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("its registry still serves its desiredImage")
            && why.contains("the daemon retries the rebase by itself and can still succeed"),
        "{report:#}"
    );
    let text = recover(&cluster, &[]).await;
    assert_eq!(text.code, Some(1), "{text:?}");
    assert!(
        text.stdout.contains(&format!(
            "NEEDS ATTENTION node {} (pool worker)",
            stuck.node
        )),
        "{text:?}"
    );

    // The daemon's retry pulls the image: the node leaves Degraded by itself, and MCO then
    // reverts the pool (its MachineOSConfig is gone). Nothing of recover's on the node.
    cluster.sim.release(&stuck.node);
    wait_pool_reverted(&cluster).await;
    assert_pool_healthy(&cluster, "worker").await;
    let a = node_annotations(&cluster.client, &stuck.node)
        .await
        .expect("node");
    assert_eq!(a.get(MARKER), None, "no marker");
    assert_eq!(recovery_events(&cluster, &stuck).await, 0, "no Event");
    let after = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(after.code, Some(0), "{after:?}");
    assert_eq!(
        nodes_in(&after.json(), "needsAttention"),
        Vec::<&str>::new()
    );
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "served again: refused, healed by the daemon's retry in {:.2?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_cannot_be_asked_needs_a_person_or_the_admins_word() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let nodes_pull = nodes_registry(&cluster).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;

    // The registry nodes pull from is down: nobody can tell whether the image is gone.
    drop(nodes_pull);
    assert_refused(
        &cluster,
        &stuck,
        "imageLossUnverified",
        "--image-loss-verified",
    )
    .await;
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(
        registry_status(&plan.json(), "needsAttention"),
        "unknown",
        "{plan:?}"
    );

    // The admin verified the loss: recoverable, and the plan says the registry did not.
    let plan = recover(&cluster, &["--image-loss-verified", "-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    let report = plan.json();
    assert_eq!(nodes_in(&report, "recoverable"), [stuck.node.as_str()]);
    assert_eq!(registry_status(&report, "recoverable"), "unknown");
    assert_the_runbook_cancel(&report["recoverable"][0], &stuck);
    let why = report["recoverable"][0]["why"].to_string();
    assert!(
        why.contains("the loss was not verified by the registry")
            && why.contains("--image-loss-verified says the admin verified it"),
        "{report:#}"
    );
    let run = recover(
        &cluster,
        &[
            "--apply",
            "--wait",
            "--image-loss-verified",
            "--timeout",
            "2m",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(report["applied"][0]["registry"]["status"], "unknown");
    let annotations = wait_node_back(&cluster, &stuck).await;
    assert_recorded_once(&cluster, &stuck, &annotations).await;
    let events = events_about(&cluster.client, "Node", &stuck.node, EVENT_REASON).await;
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("the registry could not tell; the admin verified the loss"),
        "{note}"
    );
    wait_pool_reverted(&cluster).await;
    assert_pool_healthy(&cluster, "worker").await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "unknown: refused, then recovered on the admin's word in {:.2?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_served_again_between_the_plan_and_the_patch_stops_the_cancel() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let infra = infra_pool(&cluster).await;
    let (infra_stuck, (worker_stuck, copy)) = tokio::join!(
        lose_the_image(&cluster, "infra", &infra[0]),
        lose_keeping_a_copy(&cluster, "worker", &cluster.nodes[0]),
    );

    // Both lost; the plan (infra first) cancels both.
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(
        nodes_in(&plan.json(), "recoverable"),
        [infra_stuck.node.as_str(), worker_stuck.node.as_str()]
    );

    // The run patches the infra node and waits for its daemon (held before its Done); the
    // worker's image is restored meanwhile, its daemon held so that its own retry does not
    // heal it first.
    cluster.sim.hold_before_done(&infra_stuck.node);
    let run = start_recover(
        &cluster,
        &["--apply", "--wait", "--timeout", "2m", "-o", "json"],
    );
    run.wait_for_stderr(&format!("node {}: patched", infra_stuck.node), STEP_TIMEOUT)
        .await
        .expect("the infra node patched");
    cluster.sim.hold(&worker_stuck.node);
    cluster.registry.restore(&copy).await.expect("restore");
    cluster.sim.release_before_done(&infra_stuck.node);
    let run = run.finish().await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(
        pairs(&report["applied"], "node", "outcome"),
        [
            (infra_stuck.node.as_str(), "recovered"),
            (worker_stuck.node.as_str(), "stopped")
        ],
        "{report:#}"
    );
    let stopped = &report["applied"][1];
    assert_eq!(stopped["problem"], "changedSincePlan", "{report:#}");
    assert_eq!(stopped["registry"]["status"], "available", "{report:#}");
    assert!(
        stopped["why"]
            .as_str()
            .is_some_and(|w| w.contains("its registry still serves its desiredImage")),
        "{report:#}"
    );
    assert_eq!(stopped.get("recorded"), None, "no patch attempted");
    let attention = &report["needsAttention"][0];
    assert_eq!(attention["node"], worker_stuck.node.as_str(), "{report:#}");
    assert_eq!(attention["registry"]["status"], "available", "{report:#}");
    progress_line(
        &run,
        &format!(
            "node {}: asking the registry again, as the node pulls",
            worker_stuck.node
        ),
    );
    assert_untouched(&cluster, &worker_stuck).await;
    let state = node_annotation(&cluster.client, &worker_stuck.node, STATE)
        .await
        .expect("node");
    assert_eq!(state.as_deref(), Some(STATE_DEGRADED), "left to its daemon");
    let annotations = wait_node_back(&cluster, &infra_stuck).await;
    assert_recorded_once(&cluster, &infra_stuck, &annotations).await;

    // Its daemon's retry pulls the image served again: the worker pool heals by itself.
    cluster.sim.release(&worker_stuck.node);
    wait_pool_reverted(&cluster).await;
    assert_pool_healthy(&cluster, "worker").await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "served again mid-run: one node recovered, the other left to its daemon in {:.2?}",
        started.elapsed()
    );
}
