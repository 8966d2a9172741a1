//! What differs by release: which builds MCO itself cleans up after a MachineOSConfig's
//! deletion (4.19 by label, 4.23 by controller), pre-built images' synthetic builds (4.21), and
//! 4.23's in-use check, which keeps (and leaks) an image a node of the build's pool uses.

use super::*;
use testkit::mco;
use testkit::release::{Release, ZStream};
use testkit::simulator::SimConfig;

/// Builds A (R0) and B (R1), settled on B; MOSC worker deleted with `--cascade=orphan` (the
/// garbage collector takes its ownerReference off A and B instead of deleting them) and created
/// again. Where MCO's cleanup goes by label (4.19, 4.20 before PR #6305) it takes every build
/// labelled with the name and deletes A and B with their images itself, and the recreated
/// config builds B's name again; where it goes by controller (4.20 after it, 4.23) it takes
/// only builds the deleted config controls, none, so A and B stay for good, the recreated
/// config reuses B, and prune deletes A and its image.
async fn orphaned_builds_of_a_recreated_config(z: ZStream) {
    let cluster = seed_on(z, SimConfig::fast()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let builds = settle_through(&cluster, &[R1]).await;
    let [a, b] = [&builds[0], &builds[1]];

    delete_mosc_orphaning(&cluster, "worker")
        .await
        .expect("orphaning delete");
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_pool_reverted(&cluster).await;
    testkit::poll::wait_for(
        || async { Ok((cluster.sim.pending_cleanups() == 0).then_some(())) },
        STEP_TIMEOUT,
        "MCO's cleanup of the deleted MachineOSConfig",
    )
    .await
    .expect("cleanup done");
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("recreate worker");
    let current = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("the recreated config's build");
    assert_eq!(current.mosb, b.mosb, "the same inputs, the same name");
    wait_rolled_out(&cluster, &current.image).await;

    let run = prune(&cluster, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    if z.cleans_up_by_label() {
        // MCO deleted A and B (and their images); B was built again.
        assert!(!in_registry(&cluster, &a.image).await && !in_registry(&cluster, &b.image).await);
        assert_ne!(current.image, b.image, "{z}: B built again");
        assert!(deleted(&report).is_empty(), "{report:#}");
        assert_eq!(builds_in(&report, "kept"), mosbs(&[&current]), "{report:#}");
    } else {
        // A stayed, orphaned, and no MachineOSConfig will ever take it: prune does.
        assert_eq!(current.image, b.image, "{z}: B reused");
        assert_eq!(deleted(&report), mosbs(&[a]), "{report:#}");
        wait_gone(&cluster, a).await;
        assert!(in_registry(&cluster, &b.image).await);
        let b_now = mco::mosbs(&cluster.client).get(&b.mosb).await.expect("B");
        assert!(
            b_now
                .metadata
                .owner_references
                .unwrap_or_default()
                .is_empty(),
            "B is still the orphan the recreated config reuses"
        );
    }
    wait_rolled_out(&cluster, &current.image).await;
    assert_mco_never_refused(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_19_mco_deletes_an_orphaned_config_build_itself() {
    orphaned_builds_of_a_recreated_config(Release::V4_19.into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_early_4_20_z_stream_mco_deletes_an_orphaned_config_build_itself() {
    orphaned_builds_of_a_recreated_config(Release::V4_20.early()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_late_4_20_z_stream_an_orphaned_config_build_stays_until_prune_deletes_it() {
    orphaned_builds_of_a_recreated_config(Release::V4_20.late()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_an_orphaned_config_build_stays_until_prune_deletes_it() {
    orphaned_builds_of_a_recreated_config(Release::V4_23.into()).await;
}

/// 4.21: MOSC worker seeded with a pre-built image (its synthetic build S tags the config's push
/// spec, `<repo>:latest`), then a change to R1 builds B. Prune keeps S whatever `--keep` says:
/// deleting it would make MCO delete whatever `<repo>:latest` points to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_built_images_synthetic_build_is_kept() {
    let cluster = seed_on(Release::V4_21, SimConfig::fast()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let image = push_pre_built_image(&cluster)
        .await
        .expect("pre-built image");
    create_pre_built_mosc(&cluster, "worker", &image)
        .await
        .expect("seeded MOSC");
    let seeded = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("the synthetic build");
    assert_eq!(seeded.image, image);
    wait_rolled_out(&cluster, &image).await;
    render(&cluster, R1).await;
    let b = wait_new_build(&cluster, &image).await;
    wait_rolled_out(&cluster, &b.image).await;

    let run = prune(&cluster, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert!(builds_in(&report, "deletable").is_empty(), "{report:#}");
    assert_eq!(reasons(&report, &seeded.mosb), ["tagNotItsOwn"]);
    assert!(
        report
            .to_string()
            .contains("synthetic build of a pre-built image"),
        "{report:#}"
    );
    assert!(run.stderr.contains("nothing to apply"), "{run:?}");
    assert!(
        in_registry(&cluster, &image).await,
        "the pre-built image stays"
    );
    let latest = ImageRef::parse(&cluster.push_spec()).expect("push spec");
    assert_eq!(
        cluster
            .registry
            .manifest_status(&latest.repo, latest.tag.as_deref().unwrap_or("latest"))
            .await
            .expect("registry"),
        None,
        "<repo>:latest still resolves"
    );
    assert_mco_never_refused(&cluster);
}

/// 4.23: builds A (R0) and B (R1), pool paused before B rolls out, so every node runs A. Prune
/// keeps A (MCO's in-use check would keep its image, and it would stay in the registry with no
/// build naming it). Unpaused, the nodes move to B; prune then deletes A, and MCO deletes its
/// image: nothing leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_a_build_a_node_runs_is_kept_until_the_node_moves_on_and_then_goes_with_its_image()
{
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let a = layered_and_settled(&cluster).await;
    testkit::scenario::objects::set_pool_paused(&cluster.client, "worker", true)
        .await
        .expect("pause");
    render(&cluster, R1).await;
    let b = wait_new_build(&cluster, &a.image).await;

    let run = prune(&cluster, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert!(builds_in(&report, "deletable").is_empty(), "{report:#}");
    let kept_a = reasons(&report, &a.mosb);
    assert!(kept_a.contains(&"nodeNeedsImage".to_string()), "{kept_a:?}");
    assert!(
        report.to_string().contains("3 nodes run its image"),
        "{report:#}"
    );

    testkit::scenario::objects::set_pool_paused(&cluster.client, "worker", false)
        .await
        .expect("unpause");
    wait_rolled_out(&cluster, &b.image).await;
    let run = prune(&cluster, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(deleted(&run.json()), mosbs(&[&a]), "{run:?}");
    wait_gone(&cluster, &a).await;
    assert!(
        !cluster.sim.kept_images().contains(&a.image),
        "MCO's in-use check kept nothing: {:?}",
        cluster.sim.kept_images()
    );
    assert!(in_registry(&cluster, &b.image).await);
    assert_mco_never_refused(&cluster);
    assert_faithful_and_never_degraded(&cluster, &watch);
}
