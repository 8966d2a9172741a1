//! The report's deletion with mosc-guard in deny mode, on 4.19, 4.21 and 4.23: refused while the
//! first worker is mid-update (the denial names it and the image), allowed once the rollout
//! settled, and the pool never degrades.

use super::*;
use testkit::scenario::*;
use testkit::simulator::SimConfig;

/// The guarded report's scenario on `release` ([`SimConfig::real_timing`]).
async fn guarded_seed_scenario(release: Release) {
    let g = guarded_on(&BIN, release, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    assert_eq!(cluster.sim.openshift_release(), release);
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let image = rollout.build.image_ref().expect("image reference");
    assert_guard_reads_release(cluster, release);

    // Step 4 of the report, refused with the node and the image named, and what deleting
    // would do on this release (4.23's in-use check would keep the image for this node).
    let consequence = if release.checks_pool_after_mosc_is_gone() {
        "Deleting it now leaves that image to MCO 4.23's in-use check, which keeps (and leaks) an \
         image only while its cache shows a node of the build's own pool using it"
    } else {
        "Deleting it now removes that image from the registry and the node fails \"manifest unknown\""
    };
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(
        !out.success(),
        "{release}: premature delete must fail: {out:?}"
    );
    for want in [
        "admission webhook \"deletions.mosc-guard.dev\" denied the request",
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        &format!(
            "{} (pool worker, state Working): desired {}, current <none>",
            rollout.node,
            short_image(rollout)
        ),
        consequence,
        "Wait until `oc get mcp worker` shows UPDATED=True",
    ] {
        assert!(
            out.stderr.contains(want),
            "{release}: missing {want:?} in {}",
            out.stderr
        );
    }
    let (code, report) = check_json(cluster, "machineosconfig/worker", &[]);
    assert_eq!(code, Some(1), "{release}: check agrees: {report:#}");
    assert_eq!(report["blockingNodes"][0]["node"], rollout.node.as_str());
    assert_eq!(
        report["blockingNodes"][0]["image"],
        rollout.build.image.as_str()
    );
    assert_image_in_registry(cluster, &image).await;
    assert_eq!(
        mosbs_of(&cluster.client, "worker")
            .await
            .expect("list builds")
            .len(),
        1,
        "{release}: the build is still there"
    );

    // The rollout finishes; the same command goes through.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let keeps = release.checks_pool_after_mosc_is_gone();
    if keeps {
        // A real node takes minutes to drain and reboot off the image; hold the first one so
        // it still runs the image when MCO's delete handler looks, 5 s after the deletion.
        cluster.sim.hold(&cluster.nodes[0]);
    }
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(
        out.success(),
        "{release}: delete after the rollout: {out:?}"
    );
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_build_gone(cluster, &rollout.build.mosb).await;

    if keeps {
        // 4.23 (#6348): the MOSB-delete path checks the build's pool although the MOSC is
        // gone, keeps the image its nodes still run, and nothing deletes it later: leaked.
        wait_image_kept(cluster, &rollout.build.image).await;
        cluster.sim.release(&cluster.nodes[0]);
        wait_pool_reverted(cluster).await;
        assert_image_in_registry(cluster, &image).await;
    } else {
        // MCO deletes the image with no in-use check (the MOSC is gone); no node needed it.
        wait_image_deleted(cluster, &image).await;
        wait_pool_reverted(cluster).await;
    }
    assert_faithful_and_never_degraded(cluster, &watch);
}

/// 4.19 (image mode GA, cleanup by label), [`SimConfig::real_timing`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_19_the_deletion_is_denied_until_the_rollout_completes() {
    guarded_seed_scenario(Release::V4_19).await;
}

/// 4.21 (the MCS serves the layered image to joining machines; none joins here),
/// [`SimConfig::real_timing`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_the_deletion_is_denied_until_the_rollout_completes() {
    guarded_seed_scenario(Release::V4_21).await;
}

/// 4.23 (the in-use check runs once the MOSC is gone), [`SimConfig::real_timing`]: the allowed
/// deletion leaves the image the settled nodes ran in the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_deletion_is_denied_until_the_rollout_completes() {
    guarded_seed_scenario(Release::V4_23).await;
}
