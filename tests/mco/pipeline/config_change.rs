//! A config change mid-rollout: the pool's `spec.configuration` moves to R2 while its first node
//! is updating to image X. MCO creates build B for R2 and names it in the MOSC's
//! `current-machine-os-build` annotation when B starts, while `currentImagePullSpec` still says
//! X (4.21 on, `status.machineOSBuild` still names the first build until B succeeds). The node
//! controller sends no further node anywhere while B runs (the node already sent finishes), and
//! rolls everything to B's image with R2 once B succeeded.

use super::*;
use testkit::mco::DESIRED_CONFIG;
use testkit::release::Release;
use testkit::simulator::SimConfig;

/// [`SimConfig::fast`]: only the order of events matters here.
async fn config_change_mid_rollout(release: Release) {
    let cluster = seed_on(release, SimConfig::fast()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let first = rollout.build.clone();

    cluster.sim.set_build_delay(Duration::from_secs(600));
    let b = render_r2(&cluster).await;
    assert_ne!(b, first.mosb, "a new config gets a new build");
    let built = wait_build_exists(&cluster, &b).await.expect("B created");
    assert_eq!(built.data["spec"]["machineConfig"]["name"], R2);
    wait_build_job(&cluster, &b).await.expect("B started");
    wait_for(
        || async {
            Ok((current_build(&cluster, "worker").await.as_deref() == Some(&b)).then_some(()))
        },
        STEP_TIMEOUT,
        "the MOSC to name B once it starts",
    )
    .await
    .expect("B named at its start");
    let mosc = mco::moscs(&cluster.client)
        .get("worker")
        .await
        .expect("MOSC");
    assert_eq!(
        mosc.data["status"]["currentImagePullSpec"], first.image,
        "{release}: the MOSC still points at X while B runs"
    );
    let reference = &mosc.data["status"]["machineOSBuild"];
    if release.writes_mosc_build_reference() {
        assert_eq!(
            reference["name"],
            first.mosb.as_str(),
            "{release}: {reference}"
        );
    } else {
        assert!(
            reference.is_null(),
            "{release} writes no reference: {reference}"
        );
    }
    wait_pool_updating(
        &cluster,
        "True",
        &format!("Pool is waiting for OS image build to complete (mosb: {b})"),
    )
    .await;

    // The node already sent finishes on X; nobody else is sent while B runs.
    cluster.sim.release(&rollout.node);
    wait_for(
        || async {
            let a = node_annotations(&cluster.client, &rollout.node).await?;
            Ok((a.get(mco::CURRENT_IMAGE) == Some(&first.image)
                && a.get(mco::STATE).map(String::as_str) == Some(mco::STATE_DONE))
            .then_some(()))
        },
        STEP_TIMEOUT,
        "the node already sent to X to reach it",
    )
    .await
    .expect("node done");
    assert_not_targeted(&cluster, &cluster.nodes[1..], None, Duration::from_secs(2)).await;

    // B succeeds: the MOSC points at it, and every node rolls to B's image with R2.
    cluster.sim.set_build_delay(Duration::from_millis(300));
    let second = wait_build_succeeded(&cluster, &b)
        .await
        .expect("B succeeds");
    wait_rolled_out(&cluster, &second.image).await;
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await.expect("node");
        assert_eq!(
            a.get(DESIRED_CONFIG).map(String::as_str),
            Some(R2),
            "{node}"
        );
    }
    let mosc = mco::moscs(&cluster.client)
        .get("worker")
        .await
        .expect("MOSC");
    assert_eq!(mosc.data["status"]["currentImagePullSpec"], second.image);
    if release.writes_mosc_build_reference() {
        assert_eq!(mosc.data["status"]["machineOSBuild"]["name"], b.as_str());
    }
    assert!(!watch.ever_degraded(), "pool worker degraded");
    assert_mco_never_refused(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_20_a_config_change_names_the_new_build_at_its_start_and_stops_the_rollout() {
    config_change_mid_rollout(Release::V4_20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_the_mosc_references_the_new_build_only_once_it_succeeded() {
    config_change_mid_rollout(Release::V4_21).await;
}
