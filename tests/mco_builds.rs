//! New builds of a MachineOSConfig on the real control plane (with the real garbage collector),
//! the registry and the MCO 4.20 simulator, with mosc-guard in front: a build running or failed
//! while the pool runs the previous image, and the rebuild annotation mid-rollout.
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`): the late cleanup and the rebuilds race its 5 s delete delay.
//! Every test also asserts that the simulator never wrote an object the API server rejects.
//!
//! Each test starts its own control plane, registry and guard, and stops them when it ends.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use testkit::cli::CliRun;
use testkit::guard::GuardBin;
use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, REBUILD};
use testkit::scenario::{
    DegradedWatch, STEP_TIMEOUT, assert_faithful_and_never_degraded, assert_image_in_registry,
    events_about, kubectl, layered_and_settled, mosbs_of, node_annotations, registered_guard,
    render, seed, wait_for, wait_new_build, wait_pool_reverted, wait_pool_updating,
    wait_rolled_out,
};
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// Deleting MOSC `worker` while the pool waits on a new build (slow, or failed) with every node
/// still on the MOSC's current image: nothing is in flight, so the guard allows it, and the pool
/// leaves image mode without degrading.
async fn build_pending_then_delete(fail: bool) {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
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

    let CliRun { code, stdout, .. } = cluster.check(&BIN, "worker", &[]);
    assert_eq!(code, Some(0), "check allows it: {stdout}");
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
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
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
