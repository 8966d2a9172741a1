//! The report's deletion without the guard, on 4.19, 4.21 and 4.23, and what each release's
//! machine-os-builder does with it: 4.19 and 4.21 delete the image the updating node still needs
//! (it fails "manifest unknown", the pool degrades); 4.23's in-use check keeps it for the
//! node of the build's pool, which updates fine, and the image is leaked. 4.19's cleanup also
//! deletes a build labelled with the MachineOSConfig's name that it does not control.

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use super::*;
use testkit::mco::{self, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED, REASON, STATE, STATE_DONE};
use testkit::scenario::*;
use testkit::simulator::SimConfig;

/// A build an earlier MachineOSConfig `worker` left behind (deleted with `--cascade=orphan`,
/// which takes the ownerReference off its builds): labelled with the name and pool, controlled
/// by no MachineOSConfig, its image still in the registry.
const LEFTOVER: &str = "worker-0c7d2e9f4a1b3c5d6e8f0a2b4c6d8e0f";
const LEFTOVER_CONFIG: &str = "rendered-worker-3e9a0c1d7f2b4e6a8c0d2f4b6e8a0c1d";

/// Creates [`LEFTOVER`] as MCO 4.20 left it (Succeeded, minus the ownerReference) and pushes its
/// image; returns the image.
async fn leave_a_build_behind(cluster: &Cluster) -> ImageRef {
    let repo = ImageRef::parse(&cluster.push_spec()).expect("push spec");
    let digest = cluster
        .registry
        .push_image(&repo.repo, LEFTOVER)
        .await
        .expect("push the leftover build's image");
    let mut mosb = DynamicObject::new(LEFTOVER, &mco::mosb_resource()).data(json!({
        "spec": {
            "machineConfig": {"name": LEFTOVER_CONFIG},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": repo.with_tag(LEFTOVER),
        }
    }));
    mosb.metadata.labels = Some(
        [
            (LABEL_MOSC, "worker"),
            (LABEL_POOL, "worker"),
            (LABEL_RENDERED, LEFTOVER_CONFIG),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    mosb.metadata.annotations = Some(
        [(
            "machineconfiguration.openshift.io/rendered-image-push-secret".to_owned(),
            "push-secret".to_owned(),
        )]
        .into(),
    );
    mosb.metadata.finalizers = Some(vec!["foregroundDeletion".to_owned()]);
    let api = mco::mosbs(&cluster.client);
    api.create(&PostParams::default(), &mosb)
        .await
        .expect("create the leftover build");
    // The conditions 4.20 leaves on a succeeded build.
    let condition = |type_: &str, status: bool, reason: &str| {
        json!({"type": type_, "status": if status { "True" } else { "False" }, "reason": reason,
               "message": "", "lastTransitionTime": "2026-05-04T09:12:40Z"})
    };
    let status = json!({"status": {
        "conditions": [condition("Prepared", false, "Prepared"), condition("Building", false, "Building"),
                       condition("Succeeded", true, "Ready"), condition("Failed", false, "Ready"),
                       condition("Interrupted", false, "Ready")],
        "buildStart": "2026-05-04T09:12:18Z",
        "buildEnd": "2026-05-04T09:12:40Z",
        "builder": {"imageBuilderType": "Job", "job": {"group": "batch", "resource": "jobs",
                    "namespace": "openshift-machine-config-operator", "name": format!("build-{LEFTOVER}")}},
        "digestedImagePushSpec": repo.with_digest(&digest),
    }});
    api.patch_status(LEFTOVER, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the leftover build's status");
    ImageRef::parse(&repo.with_digest(&digest)).expect("digested image")
}

/// The report's scenario on `release` without the guard ([`SimConfig::real_timing`]).
async fn unguarded_seed_scenario(release: Release) {
    let cluster = seed_on(release, SimConfig::real_timing()).await;
    let client = &cluster.client;
    let watch = DegradedWatch::start(client, "worker");
    let leftover = leave_a_build_behind(&cluster).await;

    // Steps 1-3: MOSC created, build succeeded, first node mid-update to the new image (held).
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let image = rollout.build.image_ref().expect("digested image reference");

    // Step 4: delete the MOSC at once. Nothing stops it.
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{release}: delete: {}", out.stderr);
    wait_mosc_gone(client, "worker").await;
    // The garbage collector deletes the build the MOSC controlled.
    wait_build_gone(&cluster, &rollout.build.mosb).await;

    if release.checks_pool_after_mosc_is_gone() {
        // 4.23: the MOSB-delete path's in-use check sees the node of the build's pool that
        // desires the image and keeps it.
        wait_image_kept(&cluster, &rollout.build.image).await;
        assert_image_in_registry(&cluster, &image).await;
    } else {
        // MCO deletes the image with no in-use check (the MOSC is gone).
        wait_image_deleted(&cluster, &image).await;
    }
    let what = format!("{release}: a node mid-update keeps its desiredImage");
    assert_keeps_desired_image(&cluster, &rollout, &what).await;

    // The MOSC-delete cleanup: 4.19 takes every build labelled with the MOSC's name; later
    // releases only those the deleted MOSC controls, so the leftover stays.
    if release.cleans_up_by_label() {
        wait_build_gone(&cluster, LEFTOVER).await;
        wait_image_deleted(&cluster, &leftover).await;
    } else {
        wait_for(
            || async { Ok((cluster.sim.pending_cleanups() == 0).then_some(())) },
            STEP_TIMEOUT,
            "MCO to handle the MachineOSConfig's delete event",
        )
        .await
        .expect("cleanup handled");
        let builds = mosbs_of(client, "worker").await.expect("list builds");
        let names: Vec<_> = builds
            .iter()
            .filter_map(|b| b.metadata.name.as_deref())
            .collect();
        assert_eq!(
            names,
            [LEFTOVER],
            "{release}: only the leftover build stays"
        );
        assert_image_in_registry(&cluster, &leftover).await;
    }

    cluster.sim.release(&rollout.node);
    if release.checks_pool_after_mosc_is_gone() {
        assert_kept_image_leaks(&cluster, &rollout, &watch).await;
    } else {
        // 4.19, 4.20-4.22: the released node's daemon cannot pull the deleted image.
        wait_node_fails_pull(&cluster, &rollout).await;
    }
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
}

/// 4.23: the released node pulls the kept image, is Done, then leaves image mode with the rest
/// of the pool; the pool never degrades, and the image stays in the registry with nothing
/// referring to it.
async fn assert_kept_image_leaks(cluster: &Cluster, rollout: &Rollout, watch: &DegradedWatch) {
    wait_pool_reverted(cluster).await;
    assert!(!watch.ever_degraded(), "pool worker degraded");
    let annotations = node_annotations(&cluster.client, &rollout.node)
        .await
        .expect("read node");
    assert_eq!(annotations.get(STATE).map(String::as_str), Some(STATE_DONE));
    // `SetDone` clears the reason (an empty value).
    assert_eq!(annotations.get(REASON).map(String::as_str), Some(""));
    let image = rollout.build.image_ref().expect("image reference");
    assert_image_in_registry(cluster, &image).await;
    let moscs = mco::list_all(&mco::moscs(&cluster.client))
        .await
        .expect("list MOSCs");
    let builds = mco::list_all(&mco::mosbs(&cluster.client))
        .await
        .expect("list MOSBs");
    let nodes = mco::list_all(&mco::nodes(&cluster.client))
        .await
        .expect("list nodes");
    let refers = |v: &serde_json::Value| v.to_string().contains(&rollout.build.image);
    assert!(moscs.is_empty(), "{moscs:?}");
    assert!(
        !builds.iter().any(|b| refers(&b.data)),
        "a build still names the image"
    );
    assert!(
        !nodes.iter().any(|n| refers(&json!(n.metadata.annotations))),
        "a node still names the image"
    );
}

/// 4.19, [`SimConfig::real_timing`]: the node fails; the leftover build goes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_19_the_deletion_degrades_the_pool_and_takes_builds_it_does_not_control() {
    unguarded_seed_scenario(Release::V4_19).await;
}

/// 4.21, [`SimConfig::real_timing`]: the node fails, as on 4.20; the leftover build stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_the_deletion_degrades_the_pool() {
    unguarded_seed_scenario(Release::V4_21).await;
}

/// 4.23, [`SimConfig::real_timing`]: the in-use check keeps the image for the updating node,
/// which does not fail; the image leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_deletion_keeps_and_leaks_the_image_the_updating_node_needs() {
    unguarded_seed_scenario(Release::V4_23).await;
}
