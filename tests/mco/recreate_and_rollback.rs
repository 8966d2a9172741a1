//! A MachineOSConfig's history on the real control plane (with the real garbage collector),
//! the registry and the MCO simulator (on 4.20), with mosc-guard in front: deleted and recreated with
//! the same name while MCO's cleanup of the old one runs late, and a config change rolled back to
//! an old build.
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`): the late cleanup and the rebuilds race its 5 s delete delay.
//! Every test also asserts that the simulator never wrote an object the API server rejects.
//!
//! Each test starts its own control plane, registry and guard, and stops them when it ends.

use testkit::guard::GuardBin;
use testkit::mco::{self};
use testkit::scenario::{
    DEFER, DegradedWatch, STEP_TIMEOUT, assert_faithful_and_never_degraded,
    assert_image_in_registry, catch_first_node_updating_to, create_mosc, kubectl,
    layered_and_settled, mosbs_of, registered_guard, render, seed, wait_for, wait_mosc_gone,
    wait_new_build, wait_pool_reverted, wait_rolled_out,
};
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// MOSC `worker` deleted (settled: allowed) and recreated with the same name; MCO's cleanup of
/// the deleted MOSC runs late, while the new MOSC's image is rolling out. It removes only the builds the
/// deleted MOSC controlled: the new image survives and the rollout completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_name_recreate_keeps_the_new_mosc_image_through_a_late_cleanup() {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let first = layered_and_settled(&cluster).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    cluster.sim.hold_cleanup(true);
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "a settled pool's MOSC may go: {out:?}");
    wait_mosc_gone(&cluster.client, "worker").await;
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
    let _guard = registered_guard(&BIN, &cluster, args).await;
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
