//! A MOSC recreated over a build of the one it replaced, then deleted. MOSC `worker` is deleted
//! with `--cascade=orphan` while its first node is updating to build A's image X: the garbage
//! collector takes the ownerReference off A instead of deleting it, and the machine-os-builder
//! restarts before it handles the delete event (so it never cleans A up). `worker` is created
//! again with the same spec: MCO reuses A (`reuseExistingMachineOSBuildIfPossible` checks no
//! owner), and the node keeps pulling X. Deleting the new `worker`:
//!
//! - an early 4.20.z cleans up by label: A is labelled with the name, so X is deleted and the
//!   node fails "manifest unknown". Here the cluster is mid-upgrade to the late 4.20.z whose
//!   builder has the fix: the old builder still runs, and it is the one that cleans up;
//! - 4.23 cleans up by controller: the new MOSC does not control A, so A and X stay, and the
//!   node finishes.

use super::*;
use testkit::image_ref::ImageRef;
use testkit::mco::{REASON, STATE, STATE_DEGRADED};
use testkit::release::{Release, ZStream};
use testkit::simulator::SimConfig;

/// Steps up to the recreated MOSC naming A while the first node pulls X; returns the rollout.
pub(super) async fn recreate_over_an_orphaned_build(cluster: &Cluster) -> Rollout {
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let a = &rollout.build.mosb;

    cluster.sim.hold_cleanup(true);
    delete_mosc_orphaning(cluster, "worker")
        .await
        .expect("orphaning delete");
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_for(
        || async {
            let b = mco::mosbs(&cluster.client).get(a).await?;
            Ok(b.metadata
                .owner_references
                .unwrap_or_default()
                .is_empty()
                .then_some(()))
        },
        STEP_TIMEOUT,
        "the garbage collector to orphan A",
    )
    .await
    .expect("A orphaned");
    // The builder restarts with the delete event still queued: it is lost. (It must have been
    // queued first: a restart before the watch delivered it would see the event afterwards.)
    wait_for(
        || async { Ok((cluster.sim.pending_cleanups() > 0).then_some(())) },
        STEP_TIMEOUT,
        "the builder to have queued the delete event of worker",
    )
    .await
    .expect("delete event queued");
    cluster.sim.restart_builder();
    wait_for(
        || async { Ok((cluster.sim.pending_cleanups() == 0).then_some(())) },
        STEP_TIMEOUT,
        "the restarted builder to have no delete event queued",
    )
    .await
    .expect("queue empty");
    cluster.sim.hold_cleanup(false);

    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("recreate worker");
    wait_for(
        || async {
            let named = current_build(cluster, "worker").await.as_deref() == Some(a.as_str());
            let image = current_image(cluster, "worker").await?;
            Ok((named && image.as_deref() == Some(rollout.build.image.as_str())).then_some(()))
        },
        STEP_TIMEOUT,
        "the recreated MOSC to reuse A",
    )
    .await
    .expect("A reused");
    let orphan = mco::mosbs(&cluster.client).get(a).await.expect("A");
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "MCO does not adopt A: the new MOSC does not control it"
    );
    let desired = node_annotation(&cluster.client, &rollout.node, DESIRED_IMAGE)
        .await
        .expect("node");
    assert_eq!(desired.as_deref(), Some(rollout.build.image.as_str()));
    rollout
}

/// Deletes the recreated MOSC and waits until MCO handled its delete event.
pub(super) async fn delete_and_clean_up(cluster: &Cluster) {
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
    wait_mosc_gone(&cluster.client, "worker").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    wait_for(
        || async { Ok((cluster.sim.pending_cleanups() == 0).then_some(())) },
        STEP_TIMEOUT,
        "MCO to handle the delete event",
    )
    .await
    .expect("cleanup handled");
}

/// [`SimConfig::fast`] (the builder's restart makes the delete delay irrelevant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_upgrade_an_early_4_20_builder_deletes_an_image_the_deleted_mosc_did_not_control() {
    let early = Release::V4_20.early();
    let cluster = seed_on(early, SimConfig::fast()).await;
    cluster
        .start_upgrade(Release::V4_20)
        .await
        .expect("upgrade starts");
    let history = release_history(&cluster).await.expect("history");
    assert_eq!(
        (history[0].0.as_str(), history[0].1.as_str(), &history[0].2),
        (
            Release::V4_20.version(),
            "Partial",
            &serde_json::Value::Null
        )
    );
    assert_eq!(
        (history[1].0.as_str(), history[1].1.as_str()),
        (early.version(), "Completed")
    );
    assert_eq!(cluster.sim.z_stream(), early, "the old builder still runs");

    let rollout = recreate_over_an_orphaned_build(&cluster).await;
    delete_and_clean_up(&cluster).await;
    let image = ImageRef::parse(&rollout.build.image).expect("image");
    wait_image_gone(
        &cluster,
        &image,
        "the early builder's cleanup by label to delete X",
    )
    .await;
    wait_build_gone(&cluster, &rollout.build.mosb).await;
    cluster.sim.release(&rollout.node);
    let degraded = wait_node_degraded(&cluster).await;
    assert!(
        degraded.message.contains("manifest unknown"),
        "{degraded:?}"
    );
    let a = node_annotations(&cluster.client, &rollout.node)
        .await
        .expect("node");
    assert_eq!(a.get(STATE).map(String::as_str), Some(STATE_DEGRADED));
    assert!(
        a.get(REASON)
            .is_some_and(|r| r.contains("manifest unknown")),
        "{a:?}"
    );

    // The upgrade completes: MCO plays the late z-stream from now on.
    cluster.finish_upgrade().await.expect("upgrade completes");
    assert_eq!(cluster.sim.z_stream(), ZStream::from(Release::V4_20));
    let history = release_history(&cluster).await.expect("history");
    assert_eq!(history[0].1, "Completed");
    assert!(history[0].2.is_string(), "{history:?}");
    assert_mco_never_refused(&cluster);
}

/// [`SimConfig::fast`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_cleanup_keeps_a_build_the_deleted_mosc_did_not_control() {
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let rollout = recreate_over_an_orphaned_build(&cluster).await;
    delete_and_clean_up(&cluster).await;
    assert_image_in_registry(&cluster, &rollout.build.image_ref().expect("image")).await;
    assert!(
        mco::mosbs(&cluster.client)
            .get_opt(&rollout.build.mosb)
            .await
            .expect("A")
            .is_some(),
        "A stays (leaked)"
    );
    cluster.sim.release(&rollout.node);
    wait_pool_reverted(&cluster).await;
    assert_mco_never_refused(&cluster);
}
