//! The pipeline with mosc-guard in front, as shipped (the enforcing webhook keeps MCO out with a
//! matchCondition on its user name; the observing one sees MCO's deletions): the rebuild
//! annotation while the first worker is updating to the current image. MCO deletes the current
//! build itself, as the machine-os-builder; the guard admits it (recording that anyone else
//! would have been refused), MCO's own in-use check keeps the image the node is pulling, the
//! rebuild goes ahead at once, and no request of MCO is refused.

use super::*;
use testkit::guard::GuardBin;
use testkit::mco::REBUILD;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// [`SimConfig::real_timing`]: the rebuilt image is pushed to the old build's tag after MCO's
/// 5 s delete delay, as a real build's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_admits_the_builders_own_deletion_of_a_build_a_node_is_pulling() {
    let cluster = seed(SimConfig::real_timing()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let old = mco::mosbs(&cluster.client)
        .get(&rollout.build.mosb)
        .await
        .expect("build");

    let patch = serde_json::json!({"metadata": {"annotations": {REBUILD: ""}}});
    mco::moscs(&cluster.client)
        .patch(
            "worker",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("annotate for rebuild");
    // The guard admitted MCO's deletion of the build the node is pulling.
    wait_for_events_about(
        &cluster.client,
        "MachineOSBuild",
        &rollout.build.mosb,
        "DeletionByMCOAdmitted",
        STEP_TIMEOUT,
    )
    .await
    .expect("deletion admitted");

    // Rebuilt under the same name while the node is still held on the old image, which MCO's
    // own in-use check kept.
    let rebuilt = wait_new_build(&cluster, &rollout.build.image).await;
    assert_eq!(rebuilt.mosb, rollout.build.mosb, "a same-name rebuild");
    let new = mco::mosbs(&cluster.client)
        .get(&rebuilt.mosb)
        .await
        .expect("build");
    assert_ne!(
        new.metadata.uid, old.metadata.uid,
        "deleted and created again"
    );
    assert_image_in_registry(&cluster, &rollout.build.image_ref().expect("image")).await;
    assert_eq!(
        cluster.sim.refused_by_webhook(),
        Vec::<String>::new(),
        "no request of MCO refused"
    );

    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rebuilt.image).await;
    assert!(!watch.ever_degraded(), "pool worker degraded");
    assert_mco_never_refused(&cluster);
}
