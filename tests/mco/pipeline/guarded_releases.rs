//! The recreated MOSC's orphaned build with the guard installed (the scenario of [`cleanup`]:
//! MOSC `worker` recreated over build A of the one it replaced, A orphaned, the first node
//! still pulling A's image X): deleting the new `worker` is refused on an early 4.20.z, whose
//! builder cleans up by label and would delete X, until the node has X, then allowed; it is
//! allowed at once on 4.23, whose builder keeps A; and while an upgrade from an early 4.22.z to
//! 4.23 is in flight (4.22's builder still runs) it is refused with both releases named, then
//! allowed once the upgrade has completed.

use super::*;
use cleanup::{delete_and_clean_up, recreate_over_an_orphaned_build};
use testkit::guard::GuardBin;
use testkit::release::Release;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// `kubectl delete machineosconfig worker`: refused (with its message) or allowed.
async fn delete_worker(cluster: &Cluster) -> Result<(), String> {
    let out = kubectl(
        cluster,
        ["delete", "machineosconfig", "worker", "--dry-run=server"],
    )
    .await;
    if out.success() {
        Ok(())
    } else {
        Err(out.stderr)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_early_4_20_z_stream_the_orphaned_build_is_guarded_until_its_node_arrives() {
    let cluster = seed_on(Release::V4_20.early(), SimConfig::fast()).await;
    let rollout = recreate_over_an_orphaned_build(&cluster).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    let refusal = delete_worker(&cluster).await.expect_err("refused");
    for want in [
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        &format!("{} (pool worker, state Working)", rollout.node),
        "Decided with the rules of OpenShift 4.20",
    ] {
        assert!(refusal.contains(want), "missing {want:?} in {refusal}");
    }
    // Liveness: once the node has X, the same deletion goes through, and the cleanup by label
    // deletes X with nothing left to degrade.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    let allowed = wait_for(
        || async { Ok(delete_worker(&cluster).await.ok()) },
        STEP_TIMEOUT,
        "the deletion to be allowed once the node has X",
    )
    .await;
    assert!(allowed.is_ok(), "{allowed:?}");
    delete_and_clean_up(&cluster).await;
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "pool worker degraded");
    assert_mco_never_refused(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_orphaned_build_is_not_deleted_so_the_deletion_is_allowed_at_once() {
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let rollout = recreate_over_an_orphaned_build(&cluster).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    delete_worker(&cluster).await.expect("allowed on 4.23");
    delete_and_clean_up(&cluster).await;
    assert_image_in_registry(&cluster, &rollout.build.image_ref().expect("image")).await;
    cluster.sim.release(&rollout.node);
    wait_pool_reverted(&cluster).await;
    assert_mco_never_refused(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_in_flight_decides_with_both_releases_until_it_completes() {
    let cluster = seed_on(Release::V4_22.early(), SimConfig::fast()).await;
    let rollout = recreate_over_an_orphaned_build(&cluster).await;
    cluster
        .start_upgrade(Release::V4_23)
        .await
        .expect("upgrade starts");
    let guard = registered_guard(&BIN, &cluster, &[]).await;

    let refusal = delete_worker(&cluster)
        .await
        .expect_err("refused mid-upgrade");
    assert!(
        refusal.contains(&format!(
            "Decided with the most cautious of the rules of OpenShift 4.22 and 4.23 (an upgrade \
             to {} is in flight; MCO's builder of {} may still run).",
            Release::V4_23.version(),
            Release::V4_22.early().version()
        )),
        "{refusal}"
    );
    let rows = guard.metrics().await.expect("metrics");
    for row in ["4.22", "4.23"] {
        assert!(
            rows.contains(&format!("mosc_guard_release_rules{{release=\"{row}\"}} 1")),
            "{rows}"
        );
    }

    // MCO's new builder rolls out and the upgrade completes: 4.23's rules alone, and the same
    // deletion goes through while the node still pulls X, which 4.23's cleanup keeps.
    cluster.roll_out_mco(Release::V4_23);
    cluster.finish_upgrade().await.expect("upgrade completes");
    let allowed = wait_for(
        || async { Ok(delete_worker(&cluster).await.ok()) },
        STEP_TIMEOUT,
        "the deletion to be allowed once the upgrade completed",
    )
    .await;
    assert!(allowed.is_ok(), "{allowed:?}");
    let rows = guard.metrics().await.expect("metrics");
    assert!(
        rows.contains("mosc_guard_release_rules{release=\"4.23\"} 1")
            && !rows.contains("mosc_guard_release_rules{release=\"4.22\"}"),
        "{rows}"
    );
    delete_and_clean_up(&cluster).await;
    assert_image_in_registry(&cluster, &rollout.build.image_ref().expect("image")).await;
    cluster.sim.release(&rollout.node);
    wait_pool_reverted(&cluster).await;
    assert_mco_never_refused(&cluster);
}
