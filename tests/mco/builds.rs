//! New builds of a MachineOSConfig on the real control plane (with the real garbage collector),
//! the registry and the MCO simulator (on 4.20), with mosc-guard in front: a build running or failed
//! while the pool runs the previous image (the rebuild annotation mid-rollout, MCO's own deletion
//! admitted, is in tests/mco/pipeline/guarded.rs).
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`): the late cleanup and the rebuilds race its 5 s delete delay.
//! Every test also asserts that the simulator never wrote an object the API server rejects.
//!
//! Each test starts its own control plane, registry and guard, and stops them when it ends.

use std::time::Duration;

use testkit::cli::CliRun;
use testkit::guard::GuardBin;
use testkit::mco::{CURRENT_IMAGE, DESIRED_IMAGE};
use testkit::scenario::{
    DegradedWatch, assert_faithful_and_never_degraded, kubectl, layered_and_settled,
    node_annotations, registered_guard, render, seed, wait_pool_reverted, wait_pool_updating,
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
