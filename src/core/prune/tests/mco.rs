//! What MCO does with builds, per release, and what the plan keeps for it: a same-name rebuild
//! whose tag still holds the previous image, a pre-built image's synthetic build (4.21 on), a
//! joining machine (4.21 on), the release the plan decided with.

use super::*;

#[test]
fn a_failed_same_name_rebuild_that_is_current_keeps_the_image_its_tag_still_holds() {
    // The rebuild annotation: MCO deleted build 5 (its image kept: nodes run it) and built it
    // again under the same name, and the rebuild failed. The config still names it and still
    // points at image 5, which no build carries now.
    let mut c = Cluster::settled(5);
    *c.build_mut(5) = failed(5, 30 * 24 * 60);
    let plan = c.plan(keep(0));
    let rebuilt = plan.build(&name(5)).expect("5");
    assert_eq!(rebuilt.deletes, [img(5)], "its tag still holds image 5");
    assert_eq!(
        rebuilt.reasons(),
        [
            Keep::NodeNeedsImage,
            Keep::CurrentBuild,
            Keep::PoolConfiguration
        ]
    );
    assert_eq!(deletable(&plan), names(&[1, 2, 3, 4]));
}

#[test]
fn a_failed_build_whose_tag_may_hold_an_earlier_image_in_use_is_kept() {
    // Build 7 failed and is no longer current. A node still runs an image of the same
    // repository that no build carries (an earlier build 7's, kept by an in-use check): the
    // tag <repo>:<build 7> may still point at it.
    let mut c = Cluster::settled(3);
    c.builds.push(failed(7, 600));
    c.nodes.push(on("kept-by-mco", 0x77));
    let plan = c.plan(keep(3));
    assert_eq!(reasons(&plan, 7), [Keep::EarlierImageUnderTag]);
    let why = &plan.build(&name(7)).expect("7").why[0].text;
    assert!(
        why.contains("node kept-by-mco uses") && why.contains("no build carries"),
        "{why}"
    );
    // An image of another repository cannot be under its tag.
    c.nodes.pop();
    let elsewhere = format!("quay.io/x/y@sha256:{}", "ab".repeat(32));
    c.nodes
        .push(node("elsewhere", "worker", Some(&elsewhere), None));
    let plan = c.plan(keep(3));
    assert_eq!(deletable(&plan), names(&[7]));
}

#[test]
fn a_pre_built_images_synthetic_build_is_kept_whatever_else_holds() {
    // 4.21: MOSC worker was seeded with a pre-built image; a later change built image 2.
    let mut c = Cluster::settled(2);
    c.release = "4.21.3";
    let mut synthetic = build(1, 90 * 24 * 60);
    synthetic["metadata"]["labels"]["machineconfiguration.openshift.io/pre-built-image"] =
        json!("true");
    synthetic["spec"]["renderedImagePushSpec"] = json!(format!("{REPO}:latest"));
    synthetic["status"]["digestedImagePushSpec"] =
        json!(format!("quay.io/acme/prebuilt@sha256:{}", "ab".repeat(32)));
    *c.build_mut(1) = synthetic;
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 1), [Keep::TagNotItsOwn]);
    let why = &plan.build(&name(1)).expect("1").why[0].text;
    assert!(
        why.contains("synthetic build of a pre-built image") && why.contains(":latest"),
        "{why}"
    );
    assert!(deletable(&plan).is_empty());
}

#[test]
fn a_joining_machine_that_would_pull_an_image_keeps_its_build_from_4_21() {
    // A config rolled back: image 4 is current again while build 5 stays; a machine joins.
    // The Machine Config Server serves only an image outside the internal registry.
    let mut c = Cluster::settled(5);
    let external = format!("quay.io/acme/ocb-image@sha256:{}", "44".repeat(32));
    c.build_mut(4)["status"]["digestedImagePushSpec"] = json!(external);
    let mut config = mosc(4);
    config["status"]["currentImagePullSpec"] = json!(external);
    c.moscs = vec![config];
    c.pools = vec![pool(4, 4)];
    c.nodes = vec![node("worker-a", "worker", Some(&external), Some(&external))];
    let machine = json!({
        "metadata": {"name": "ci-worker-a-7kz2p", "namespace": "openshift-machine-api"},
        "spec": {"providerSpec": {"value": {"userDataSecret": {"name": "worker-user-data"}}}},
        "status": {"phase": "Provisioning"}
    });
    for (release, joining) in [("4.20.8", false), ("4.21.3", true)] {
        c.release = release;
        let mut snapshot = c.snapshot();
        snapshot.machines = arcs(std::slice::from_ref(&machine));
        let plan = plan(&snapshot, &keep(0), now());
        agrees(&snapshot, &plan);
        assert_eq!(
            reasons(&plan, 4).contains(&Keep::JoiningMachine),
            joining,
            "{release}: {:?}",
            reasons(&plan, 4)
        );
        assert_eq!(deletable(&plan), names(&[1, 2, 3, 5]), "{release}");
    }
}

#[test]
fn the_plan_says_which_release_rules_decided() {
    let mut c = Cluster::settled(2);
    c.release = "4.23.1";
    assert_eq!(c.plan(defaults()).rules.row_names(), ["4.23"]);
    c.release = "4.25.0";
    let plan = c.plan(defaults());
    assert!(plan.rules.cautious());
    let images = crate::core::prune::images::ImagePlan::default();
    let report = Report::new(&plan, &images, Vec::new());
    assert!(
        report.warnings.iter().any(|w| w.contains("most cautious")),
        "{:?}",
        report.warnings
    );
}
