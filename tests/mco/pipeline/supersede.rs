//! A failing build and the fix superseding it: the pool moves to R2, build B fails (the pool
//! stops, "Pool update stopped due to OS image build failure"); the admin fixes the
//! Containerfile, so MCO names a new build C for R2. Starting C first deletes every other build
//! of the MOSC that has not succeeded (`deleteOtherBuildsForMachineOSConfig`), as the
//! machine-os-builder; while that deletion is refused (here by an admission policy) C does not
//! start (no Job) and MCO retries; once allowed, B goes, C builds and rolls out.

use super::*;
use testkit::simulator::SimConfig;

/// [`SimConfig::fast`]: only the order of events matters here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_supersedes_a_failed_build_and_a_refused_cleanup_holds_its_start() {
    let cluster = seed(SimConfig::fast()).await;
    let first = layered_and_settled(&cluster).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");

    fail_builds(&cluster, true);
    let b = render_r2(&cluster).await;
    wait_build_failed(&cluster, &b).await.expect("B fails");
    wait_pool_updating(
        &cluster,
        "False",
        &format!("Pool update stopped due to OS image build failure (mosb: {b})"),
    )
    .await;
    assert_workers_stay_on(&cluster, &first.image).await;

    // The fix, while the builder's deletions are refused: C is created but cannot start.
    fail_builds(&cluster, false);
    refuse_build_deletions_by_mob(&cluster, true, &b)
        .await
        .expect("policy in effect");
    let c = fix_containerfile(&cluster, "cowsay", &b).await;
    let created = wait_build_exists(&cluster, &c).await.expect("C created");
    assert_eq!(created.data["spec"]["machineConfig"]["name"], R2);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(cluster.client.clone(), testkit::simulator::MCO_NAMESPACE);
    assert!(
        jobs.get_opt(&testkit::simulator::job_name(&c))
            .await
            .expect("jobs")
            .is_none(),
        "C's start is aborted while B cannot be deleted"
    );
    let c_now = mco::mosbs(&cluster.client).get(&c).await.expect("C");
    assert!(c_now.data["status"]["buildStart"].is_null(), "{c_now:?}");
    assert!(
        mco::mosbs(&cluster.client)
            .get_opt(&b)
            .await
            .expect("B")
            .is_some(),
        "B is still there"
    );
    assert_eq!(
        current_build(&cluster, "worker").await.as_deref(),
        Some(b.as_str())
    );

    // Allowed again: the retried start deletes B, then C builds and rolls out.
    refuse_build_deletions_by_mob(&cluster, false, &c)
        .await
        .expect("policy gone");
    wait_build_gone(&cluster, &b).await;
    let fixed = wait_build_succeeded(&cluster, &c)
        .await
        .expect("C succeeds");
    assert_eq!(
        mosb_uid(&cluster, &c).await,
        created.metadata.uid,
        "C was started, not deleted and created again"
    );
    wait_rolled_out(&cluster, &fixed.image).await;
    assert!(!watch.ever_degraded(), "pool worker degraded");
    assert_mco_never_refused(&cluster);
}
