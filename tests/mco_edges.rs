//! MCO 4.20 paths beyond the report's, on the real control plane (with the real garbage
//! collector), the registry and the simulator, with mosc-guard in front: a build running or
//! failed while the pool runs the previous image, the rebuild annotation mid-rollout, a MOSC
//! deleted and recreated with the same name, and a config change rolled back to an old build.
//! Every test also asserts that the simulator never wrote an object the API server rejects.
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`): the late cleanup and the rebuilds race its 5 s delete delay.
//!
//! Each test starts its own control plane, registry and guard, and stops them when it ends.

mod support;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use support::guard::{Guard, register_mutating_webhook, register_validating_webhook};
use support::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, REBUILD, STATE, STATE_WORKING};
use support::scenario::{
    Build, Cluster, create_mosc, mosbs_of, node_annotations, pool_condition, wait_for,
    wait_for_build,
};
use support::simulator::SimConfig;
use support::steps::{
    DegradedWatch, STEP_TIMEOUT, assert_image_in_registry, check, events_about, kubectl, seed,
    wait_pool_reverted, wait_rolled_out,
};

/// Starts a guard with `args`, registered as the validating (and in defer mode the mutating)
/// webhook.
async fn guard(cluster: &Cluster, args: &[&str]) -> Guard {
    let guard = Guard::start_with_args(&cluster.cp, args)
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("validating webhook registered");
    if args.contains(&"defer") {
        register_mutating_webhook(&cluster.cp, &guard)
            .await
            .expect("mutating webhook registered");
    }
    guard
}

const DEFER: &[&str] = &["--deletion-mode", "defer", "--lease-namespace", "default"];

/// Creates MOSC `worker` and waits until every worker runs its first image.
async fn layered_and_settled(cluster: &Cluster) -> Build {
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("create MOSC");
    let build = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("first build");
    wait_rolled_out(cluster, &build.image).await;
    build
}

/// Points pool `worker` at another rendered MachineConfig (what the render controller does
/// when a MachineConfig changes).
async fn render(cluster: &Cluster, rendered: &str) {
    mco::mcps(&cluster.client)
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configuration": {"name": rendered}}})),
        )
        .await
        .expect("change the pool's rendered config");
}

/// Waits until the MOSC's current image differs from `previous` and its build succeeded.
async fn wait_new_build(cluster: &Cluster, previous: &str) -> Build {
    wait_for(
        || async {
            let b = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT).await?;
            Ok((b.image != previous).then_some(b))
        },
        STEP_TIMEOUT,
        "a new build of worker to succeed",
    )
    .await
    .expect("new build")
}

/// Waits until pool `worker` reports `Updating` with `status` and a message containing `text`.
async fn wait_pool_updating(cluster: &Cluster, status: &str, text: &str) {
    wait_for(
        || async {
            let c = pool_condition(&cluster.client, "worker", "Updating").await?;
            Ok(c.filter(|c| c.status == status && c.message.contains(text))
                .map(|_| ()))
        },
        STEP_TIMEOUT,
        &format!("pool worker Updating={status} with {text:?}"),
    )
    .await
    .expect("pool reports the build");
}

/// Holds the first worker and waits until it is Working with desiredImage `image`.
async fn catch_first_node_updating_to(cluster: &Cluster, image: &str) -> String {
    let node = cluster.nodes[0].clone();
    let client = &cluster.client;
    let node_ref = &node;
    wait_for(
        || async move {
            let a = node_annotations(client, node_ref).await?;
            let working = a.get(STATE).map(String::as_str) == Some(STATE_WORKING);
            Ok((working && a.get(DESIRED_IMAGE).map(String::as_str) == Some(image)).then_some(()))
        },
        STEP_TIMEOUT,
        &format!("{node} to be Working with desiredImage {image}"),
    )
    .await
    .expect("first node mid-update");
    node
}

/// The simulator wrote nothing a real 4.20 API server rejects, and the pool never degraded.
fn assert_faithful_and_never_degraded(cluster: &Cluster, watch: &DegradedWatch) {
    assert_eq!(
        cluster.sim.rejected_writes(),
        Vec::<String>::new(),
        "the simulator wrote objects the API server rejected"
    );
    assert!(!watch.ever_degraded(), "pool worker degraded");
}

/// Deleting MOSC `worker` while the pool waits on a new build (slow, or failed) with every node
/// still on the MOSC's current image: nothing is in flight, so the guard allows it, and the pool
/// leaves image mode without degrading.
async fn build_pending_then_delete(fail: bool) {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = guard(&cluster, &[]).await;
    let first = layered_and_settled(&cluster).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    if fail {
        cluster.sim.fail_builds(true);
    } else {
        cluster.sim.set_build_delay(Duration::from_secs(600));
    }
    render(&cluster, "rendered-worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9").await;
    if fail {
        wait_pool_updating(
            &cluster,
            "False",
            "Pool update stopped due to OS image build failure",
        )
        .await;
    } else {
        wait_pool_updating(
            &cluster,
            "True",
            "Pool is waiting for OS image build to complete",
        )
        .await;
    }
    // Nodes stay on the first image: MCO targets nobody without a succeeded build.
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await.expect("node");
        assert_eq!(a.get(CURRENT_IMAGE), Some(&first.image), "{node}");
        assert_eq!(a.get(DESIRED_IMAGE), Some(&first.image), "{node}");
    }

    let (code, stdout, _) = check(&cluster, "worker", &[]);
    assert_eq!(code, 0, "check allows it: {stdout}");
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "the guard allowed the deletion: {out:?}");
    wait_pool_reverted(&cluster).await;
    assert_faithful_and_never_degraded(&cluster, &watch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_while_a_new_build_runs_is_allowed_and_the_pool_reverts() {
    build_pending_then_delete(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_after_a_failed_build_is_allowed_and_the_pool_reverts() {
    build_pending_then_delete(true).await;
}

/// The rebuild annotation while the first worker is mid-update to the current image: MCO's
/// deletion of the current build is refused until the rollout settles (its in-use check keeps
/// the image), then the rebuild goes ahead and the pool rolls to the new image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_mid_rollout_waits_for_the_rollout_then_completes() {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = guard(&cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let image = rollout.build.image_ref().expect("image reference");

    mco::moscs(&cluster.client)
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {REBUILD: ""}}})),
        )
        .await
        .expect("annotate for rebuild");
    // MCO's delete of the build is refused (an Event says so); build and image stay.
    wait_for(
        || async {
            let refused = events_about(
                &cluster.client,
                "MachineOSBuild",
                &rollout.build.mosb,
                "DeletionBlocked",
            )
            .await;
            Ok((!refused.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "the guard to refuse MCO's deletion of the current build",
    )
    .await
    .expect("deletion refused");
    let builds = mosbs_of(&cluster.client, "worker").await.expect("builds");
    assert!(
        builds
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some(&rollout.build.mosb)
                && b.metadata.deletion_timestamp.is_none()),
        "the current build is kept while the rollout needs it"
    );
    assert_image_in_registry(&cluster, &image).await;

    // The rollout finishes on the old image, then the rebuild runs and rolls out.
    cluster.sim.release(&rollout.node);
    let rebuilt = wait_new_build(&cluster, &rollout.build.image).await;
    wait_rolled_out(&cluster, &rebuilt.image).await;
    let annotations = mco::moscs(&cluster.client)
        .get("worker")
        .await
        .expect("MOSC")
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(!annotations.contains_key(REBUILD), "{annotations:?}");
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// MOSC `worker` deleted (settled: allowed) and recreated with the same name; MCO's cleanup of
/// the deleted MOSC runs late, while the new MOSC's image is rolling out. It removes only the builds the
/// deleted MOSC controlled: the new image survives and the rollout completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_name_recreate_keeps_the_new_mosc_image_through_a_late_cleanup() {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = guard(&cluster, &[]).await;
    let first = layered_and_settled(&cluster).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    cluster.sim.hold_cleanup(true);
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "a settled pool's MOSC may go: {out:?}");
    wait_for(
        || async {
            Ok(mco::moscs(&cluster.client)
                .get_opt("worker")
                .await?
                .is_none()
                .then_some(()))
        },
        STEP_TIMEOUT,
        "MOSC worker to be gone",
    )
    .await
    .expect("deleted");
    // The pool leaves image mode first (holding a node before that would freeze it mid-revert).
    wait_pool_reverted(&cluster).await;
    cluster.sim.hold(&cluster.nodes[0]);
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("recreate MOSC worker");
    let second = wait_new_build(&cluster, &first.image).await;
    let node = catch_first_node_updating_to(&cluster, &second.image).await;
    assert_eq!(
        cluster.sim.pending_cleanups(),
        1,
        "the old MOSC's cleanup waits"
    );

    // The late cleanup of the deleted MOSC runs now, mid-rollout of the new one.
    cluster.sim.hold_cleanup(false);
    wait_for(
        || async { Ok((cluster.sim.pending_cleanups() == 0).then_some(())) },
        STEP_TIMEOUT,
        "the deleted MOSC's cleanup to finish",
    )
    .await
    .expect("cleanup done");
    let builds = mosbs_of(&cluster.client, "worker").await.expect("builds");
    assert!(
        builds
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some(&second.mosb)),
        "the new MOSC's build is kept: {builds:?}"
    );
    assert_image_in_registry(&cluster, &second.image_ref().expect("image")).await;

    cluster.sim.release(&node);
    wait_rolled_out(&cluster, &second.image).await;
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// A config change rolled back: MCO reuses the first config's build and rolls its image out
/// again. Deleting the MOSC mid-rollout back to that image is refused (deny) or deferred (defer)
/// like any other rollout, and the pool never degrades.
async fn rolled_back_then_delete(args: &[&str]) {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = guard(&cluster, args).await;
    let first = layered_and_settled(&cluster).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    let original = mco::pool_target_config(
        &mco::mcps(&cluster.client)
            .get("worker")
            .await
            .expect("pool"),
    );
    render(&cluster, "rendered-worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9").await;
    let second = wait_new_build(&cluster, &first.image).await;
    wait_rolled_out(&cluster, &second.image).await;

    cluster.sim.hold(&cluster.nodes[0]);
    render(&cluster, &original).await;
    let reused = wait_new_build(&cluster, &second.image).await;
    assert_eq!(
        (reused.mosb.as_str(), reused.image.as_str()),
        (first.mosb.as_str(), first.image.as_str()),
        "the rolled-back config reuses its first build and image"
    );
    let node = catch_first_node_updating_to(&cluster, &first.image).await;

    // `--wait=false`: in defer mode the object stays until the rollout settles.
    let out = kubectl(
        &cluster,
        ["delete", "machineosconfig", "worker", "--wait=false"],
    )
    .await;
    if args.contains(&"defer") {
        assert!(out.success(), "defer mode accepts the delete: {out:?}");
        assert!(out.stderr.contains("deferred"), "{out:?}");
        assert!(
            mco::moscs(&cluster.client)
                .get_opt("worker")
                .await
                .expect("MOSC")
                .is_some_and(|m| m.metadata.deletion_timestamp.is_some()),
            "the MOSC is held while {node} needs the image"
        );
    } else {
        assert!(!out.success(), "deny mode refuses the delete: {out:?}");
        assert!(
            out.stderr.contains("cannot be deleted yet") && out.stderr.contains(&node),
            "the denial names the node: {}",
            out.stderr
        );
    }
    assert_image_in_registry(&cluster, &first.image_ref().expect("image")).await;

    cluster.sim.release(&node);
    if args.contains(&"defer") {
        // Released once the rollout back to the first image settles; the pool then reverts.
        wait_pool_reverted(&cluster).await;
    } else {
        wait_rolled_out(&cluster, &first.image).await;
        let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
        assert!(out.success(), "settled: the delete goes through: {out:?}");
        wait_pool_reverted(&cluster).await;
    }
    assert_faithful_and_never_degraded(&cluster, &watch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_config_reusing_its_build_is_guarded_in_deny_mode() {
    rolled_back_then_delete(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_config_reusing_its_build_is_deferred_in_defer_mode() {
    rolled_back_then_delete(DEFER).await;
}
