//! Builds that already exist, and builds that cannot start:
//!
//! - a config rolled back while the new config's build runs: MCO reuses the old config's build
//!   (`reuseExistingMachineOSBuildIfPossible`) and deletes the running one as the
//!   machine-os-builder;
//! - a reused build whose image tag is gone from the registry: deleted and built again (a new
//!   MOSB of the same name, a new image);
//! - a build Job the API server refuses (a ResourceQuota): the MOSB stays, unstarted (MCO never
//!   deletes it for that), and starts once Jobs are admitted again.

use super::*;
use testkit::image_ref::ImageRef;
use testkit::simulator::SimConfig;

/// [`SimConfig::fast`]: only the order of events matters here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_deletes_the_running_build_and_a_gone_image_is_built_again() {
    let cluster = seed(SimConfig::fast()).await;
    let first = layered_and_settled(&cluster).await;
    let r1 = mco::pool_target_config(
        &mco::mcps(&cluster.client)
            .get("worker")
            .await
            .expect("pool"),
    );

    // R2's build runs; the pool goes back to R1: the first build is reused, R2's deleted.
    cluster.sim.set_build_delay(Duration::from_secs(600));
    let b = render_r2(&cluster).await;
    wait_build_job(&cluster, &b).await.expect("B started");
    render_pool(&cluster, "worker", &r1)
        .await
        .expect("back to R1");
    wait_build_gone(&cluster, &b).await;
    assert_eq!(
        current_build(&cluster, "worker").await.as_deref(),
        Some(first.mosb.as_str())
    );
    assert_eq!(
        current_image(&cluster, "worker")
            .await
            .expect("MOSC")
            .as_deref(),
        Some(first.image.as_str())
    );

    // R2 again, built this time; then R1 again with its image deleted from the registry.
    cluster.sim.set_build_delay(Duration::from_millis(300));
    render_pool(&cluster, "worker", R2)
        .await
        .expect("render R2");
    let second = wait_build_succeeded(&cluster, &b)
        .await
        .expect("B succeeds");
    wait_rolled_out(&cluster, &second.image).await;
    let old = mco::mosbs(&cluster.client)
        .get(&first.mosb)
        .await
        .expect("A");
    let image = ImageRef::parse(&first.image).expect("image");
    let digest = image.digest.clone().expect("digest");
    assert!(
        cluster
            .registry
            .delete_manifest(&image.repo, &digest)
            .await
            .expect("delete A's image"),
        "A's image was in the registry"
    );
    render_pool(&cluster, "worker", &r1)
        .await
        .expect("back to R1");
    let rebuilt = wait_for(
        || async {
            let a = mco::mosbs(&cluster.client).get_opt(&first.mosb).await?;
            Ok(a.filter(|a| a.metadata.uid != old.metadata.uid)
                .filter(|a| mco::condition_true(a, "Succeeded")))
        },
        STEP_TIMEOUT,
        "A to be deleted and built again",
    )
    .await
    .expect("A rebuilt");
    let new_image = rebuilt.data["status"]["digestedImagePushSpec"]
        .as_str()
        .expect("image")
        .to_owned();
    assert_ne!(new_image, first.image, "a new image");
    wait_rolled_out(&cluster, &new_image).await;
    assert_mco_never_refused(&cluster);
}

/// [`SimConfig::fast`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_build_job_leaves_the_build_unstarted_until_jobs_are_admitted() {
    let cluster = seed(SimConfig::fast()).await;
    let first = layered_and_settled(&cluster).await;

    block_build_jobs(&cluster, true).await.expect("quota");
    let b = render_r2(&cluster).await;
    let created = wait_build_exists(&cluster, &b).await.expect("B created");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = mco::mosbs(&cluster.client).get(&b).await.expect("B kept");
    assert_eq!(
        now.metadata.uid, created.metadata.uid,
        "not deleted and created again"
    );
    assert!(
        now.data["status"]["buildStart"].is_null(),
        "B never started: {now:?}"
    );
    assert_eq!(
        current_build(&cluster, "worker").await.as_deref(),
        Some(first.mosb.as_str()),
        "a build that did not start is not named"
    );
    assert_workers_stay_on(&cluster, &first.image).await;

    block_build_jobs(&cluster, false)
        .await
        .expect("quota lifted");
    wait_build_job(&cluster, &b).await.expect("B started");
    let second = wait_build_succeeded(&cluster, &b)
        .await
        .expect("B succeeds");
    assert_eq!(mosb_uid(&cluster, &b).await, created.metadata.uid);
    wait_rolled_out(&cluster, &second.image).await;
    assert_mco_never_refused(&cluster);
}
