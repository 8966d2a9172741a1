//! Pre-built images (4.21 on): a MOSC annotated `machineconfiguration.openshift.io/pre-built-image`
//! gets a synthetic build shaped as `createSyntheticMachineOSBuild` writes it, the pool rolls out
//! the pre-built image, and deleting the MOSC deletes whatever the MOSC's push-spec tag points
//! to (the synthetic build's `spec.renderedImagePushSpec`): the pre-built image itself. 4.20
//! ignores the annotation and builds.

use super::*;
use testkit::image_ref::ImageRef;
use testkit::mco::{LABEL_PRE_BUILT, PRE_BUILT_IMAGE};
use testkit::release::Release;
use testkit::simulator::SimConfig;

/// [`SimConfig::fast`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_a_pre_built_image_is_seeded_rolled_out_and_deleted_by_its_tag() {
    let cluster = seed_on(Release::V4_21, SimConfig::fast()).await;
    let image = push_pre_built_image(&cluster).await.expect("push");
    create_pre_built_mosc(&cluster, "worker", &image)
        .await
        .expect("MOSC");
    let name = build_name_for(&cluster, "worker").await.expect("name");
    let seeded = wait_build_succeeded(&cluster, &name).await.expect("seeded");
    assert_eq!(seeded.image, image);

    let mosb = mco::mosbs(&cluster.client).get(&name).await.expect("MOSB");
    let labels = mosb.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(LABEL_PRE_BUILT).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(mco::LABEL_MOSC).map(String::as_str),
        Some("worker")
    );
    assert_eq!(
        mosb.data["spec"]["renderedImagePushSpec"],
        cluster.push_spec(),
        "the MOSC's push spec, not <repo>:<mosb>"
    );
    assert!(
        mosb.data["status"]["builder"].is_null(),
        "no builder: {mosb:?}"
    );
    let conditions = mosb.data["status"]["conditions"]
        .as_array()
        .expect("conditions");
    assert!(
        conditions
            .iter()
            .all(|c| c["reason"] == "PreBuiltImageSeeded"),
        "{conditions:?}"
    );
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(cluster.client.clone(), testkit::simulator::MCO_NAMESPACE);
    assert!(
        jobs.get_opt(&testkit::simulator::job_name(&name))
            .await
            .expect("jobs")
            .is_none(),
        "a synthetic build has no Job"
    );

    // The MOSC names it, points at the image, says Seeded; the annotation goes afterwards.
    let mosc = wait_for(
        || async {
            let m = mco::moscs(&cluster.client).get("worker").await?;
            let gone = !m
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(PRE_BUILT_IMAGE));
            Ok(gone.then_some(m))
        },
        STEP_TIMEOUT,
        "the pre-built annotation to be removed",
    )
    .await
    .expect("annotation removed");
    assert_eq!(
        mosc.metadata
            .annotations
            .unwrap_or_default()
            .get(CURRENT_MOSB),
        Some(&name)
    );
    assert_eq!(mosc.data["status"]["currentImagePullSpec"], image.as_str());
    assert_eq!(mosc.data["status"]["machineOSBuild"]["name"], name.as_str());
    assert!(
        mosc.data["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .any(|c| c["type"] == "Seeded" && c["status"] == "True"),
        "{:?}",
        mosc.data["status"]
    );
    wait_rolled_out(&cluster, &image).await;

    // Deleting the MOSC (nothing guards it here): the garbage collector deletes the synthetic
    // build, and MCO deletes the image its tag points to, the pre-built one.
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
    wait_pool_reverted(&cluster).await;
    let pre_built = ImageRef::parse(&image).expect("image");
    wait_image_gone(
        &cluster,
        &pre_built,
        "MCO to delete the pre-built image by the MOSC's tag",
    )
    .await;
    assert_mco_never_refused(&cluster);
}

/// [`SimConfig::fast`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_20_the_pre_built_annotation_is_ignored_and_the_pool_builds() {
    let cluster = seed_on(Release::V4_20, SimConfig::fast()).await;
    let image = push_pre_built_image(&cluster).await.expect("push");
    create_pre_built_mosc(&cluster, "worker", &image)
        .await
        .expect("MOSC");
    let build = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("a real build");
    assert_ne!(build.image, image, "built, not seeded");
    let mosb = mco::mosbs(&cluster.client)
        .get(&build.mosb)
        .await
        .expect("MOSB");
    let labels = mosb.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key(LABEL_PRE_BUILT), "{labels:?}");
    assert!(
        mosb.data["spec"]["renderedImagePushSpec"]
            .as_str()
            .is_some_and(|s| s.ends_with(&format!(":{}", build.mosb))),
        "{mosb:?}"
    );
    wait_rolled_out(&cluster, &build.image).await;
    assert_mco_never_refused(&cluster);
}
