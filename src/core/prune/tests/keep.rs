//! The keep rules one by one: the newest N, age, state, the current build, the pool's configs,
//! nodes of any pool in any spelling.

use super::*;

#[test]
fn a_settled_pool_keeps_the_newest_three_and_lets_the_older_go() {
    let c = Cluster::settled(5);
    let plan = c.plan(defaults());
    assert_eq!(deletable(&plan), names(&[1, 2]), "oldest first");
    assert_eq!(reasons(&plan, 3), [Keep::Newest]);
    assert_eq!(reasons(&plan, 4), [Keep::Newest]);
    assert_eq!(
        reasons(&plan, 5),
        [
            Keep::NodeNeedsImage,
            Keep::CurrentBuild,
            Keep::PoolConfiguration,
            Keep::Newest
        ]
    );
    let why: Vec<&str> = plan
        .build(&name(5))
        .expect("5")
        .why
        .iter()
        .map(|w| w.text.as_str())
        .collect();
    assert!(
        why.iter()
            .any(|w| w.contains("2 nodes run its image: worker-a, worker-b")),
        "{why:#?}"
    );
    assert!(
        why.iter().any(|w| w
            .contains("the newest of the 5 succeeded builds of MachineOSConfig worker (--keep 3)")),
        "{why:#?}"
    );
    let old = plan.build(&name(1)).expect("1");
    assert_eq!(old.deletes, [img(1)], "deleting it deletes its own image");
    assert_eq!(
        old.uid.as_deref(),
        Some(format!("uid-{}", name(1)).as_str())
    );
}

#[test]
fn keep_counts_succeeded_builds_only_and_zero_keeps_none_for_age() {
    let mut c = Cluster::settled(4);
    c.builds.push(failed(9, 5 * 24 * 60));
    let plan = c.plan(keep(1));
    // 4 is current; 1-3 beyond --keep 1; the failed one (the oldest) is not a revision.
    assert_eq!(deletable(&plan), names(&[9, 1, 2, 3]));
    let failed = plan.build(&name(9)).expect("9");
    assert_eq!(failed.state, State::Failed);
    assert!(failed.deletes.is_empty(), "it pushed nothing: {failed:?}");
    let plan = c.plan(keep(0));
    assert_eq!(
        reasons(&plan, 4),
        [
            Keep::NodeNeedsImage,
            Keep::CurrentBuild,
            Keep::PoolConfiguration
        ]
    );
}

#[test]
fn young_builds_and_builds_of_unknown_age_are_kept() {
    let mut c = Cluster::settled(5);
    c.build_mut(1)["metadata"]["creationTimestamp"] = json!(ago(59));
    c.build_mut(2)["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("creationTimestamp");
    let plan = c.plan(Options {
        keep: 0,
        ..Options::default()
    });
    assert_eq!(reasons(&plan, 1), [Keep::Young]);
    assert!(
        plan.build(&name(1)).expect("1").why[0]
            .text
            .contains("created 59m ago, less than --keep-younger-than 1h")
    );
    assert_eq!(reasons(&plan, 2), [Keep::AgeUnknown]);
    assert_eq!(deletable(&plan), names(&[3, 4]));
    // A build without a timestamp counts as the newest revision.
    let plan = c.plan(keep(1));
    assert_eq!(reasons(&plan, 2), [Keep::Newest, Keep::AgeUnknown]);
    // A build "from the future" (a clock behind the API server's) is young.
    c.build_mut(3)["metadata"]["creationTimestamp"] =
        json!((now() + SignedDuration::from_mins(5)).to_string());
    assert!(reasons(&c.plan(keep(0)), 3).contains(&Keep::Young));
}

#[test]
fn a_build_still_running_is_kept_and_a_failed_one_is_not() {
    let mut c = Cluster::settled(3);
    let mut running = build(6, 120);
    running["status"] = json!({"conditions": [{"type": "Building", "status": "True"}]});
    c.builds.push(running);
    let mut pending = build(7, 120);
    pending["status"] = json!({});
    c.builds.push(pending);
    c.builds.push(failed(8, 120));
    let mut interrupted = failed(9, 120);
    interrupted["status"]["conditions"][1]["type"] = json!("Interrupted");
    c.builds.push(interrupted);
    let plan = c.plan(keep(3));
    assert_eq!(reasons(&plan, 6), [Keep::Building]);
    assert_eq!(reasons(&plan, 7), [Keep::Building]);
    assert_eq!(deletable(&plan), names(&[8, 9]));
    assert_eq!(plan.build(&name(9)).expect("9").state, State::Interrupted);
}

#[test]
fn a_node_of_any_pool_in_any_spelling_that_runs_or_wants_an_image_keeps_its_build() {
    let mut c = Cluster::settled(5);
    // An infra node still runs image 1, spelled with a tag and upper-case hex.
    let spelled = format!("{REPO}:whatever@sha256:{}", "01".repeat(32).to_uppercase());
    c.nodes
        .push(node("infra-a", "infra", Some(&spelled), Some(&spelled)));
    // A node in no pool is updating to image 2.
    c.nodes
        .push(node("lonely", "none", Some(&img(2)), Some(&img(5))));
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 1), [Keep::NodeNeedsImage]);
    assert!(
        plan.build(&name(1)).expect("1").why[0]
            .text
            .contains("1 node runs its image: infra-a")
    );
    assert_eq!(reasons(&plan, 2), [Keep::NodeNeedsImage]);
    assert!(
        plan.build(&name(2)).expect("2").why[0]
            .text
            .contains("1 node is updating to its image (desiredImage, not reached yet): lonely")
    );
    assert_eq!(deletable(&plan), names(&[3, 4]));
}

#[test]
fn the_override_annotation_does_not_make_a_needed_build_deletable() {
    let mut c = Cluster::settled(3);
    c.nodes.push(on("old", 1));
    c.build_mut(1)["metadata"]["annotations"] =
        json!({crate::core::model::OVERRIDE_ANNOTATION: "cleanup"});
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 1), [Keep::NodeNeedsImage]);
}

#[test]
fn a_pool_mid_rollout_keeps_the_build_it_rolls_out_and_the_one_its_nodes_run() {
    // Pool worker moved from R4 to R5: build 5 succeeded and is current, one node still on 4.
    let mut c = Cluster::settled(5);
    c.pools = vec![pool(5, 4)];
    c.nodes = vec![on("worker-a", 5), on("worker-b", 4)];
    let plan = c.plan(keep(0));
    assert!(
        reasons(&plan, 5).contains(&Keep::PoolRollingOut),
        "{:?}",
        reasons(&plan, 5)
    );
    assert_eq!(
        reasons(&plan, 4),
        [Keep::NodeNeedsImage, Keep::PoolConfiguration]
    );
    let why = &plan.build(&name(4)).expect("4").why;
    assert!(
        why.iter().any(
            |w| w.text.contains("status.configuration") && w.text.contains("a rollback reuses")
        ),
        "{why:#?}"
    );
    assert_eq!(deletable(&plan), names(&[1, 2, 3]));
}

#[test]
fn the_build_for_the_pools_configs_is_kept_even_when_no_node_runs_it() {
    // A config change rolled back mid-build: spec R2 again, status R5; nothing runs image 2.
    let mut c = Cluster::settled(5);
    c.pools = vec![pool(2, 5)];
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 2), [Keep::PoolConfiguration]);
    assert!(
        plan.build(&name(2)).expect("2").why[0]
            .text
            .contains("spec.configuration")
    );
    assert_eq!(deletable(&plan), names(&[1, 3, 4]));
}

#[test]
fn a_pool_or_build_that_does_not_say_its_config_keeps_the_configs_builds() {
    let mut c = Cluster::settled(3);
    c.pools[0]["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("configuration");
    let plan = c.plan(keep(0));
    assert!(deletable(&plan).is_empty());
    assert!(
        plan.build(&name(1)).expect("1").why[0]
            .text
            .contains("pool worker does not say its spec.configuration")
    );
    let mut c = Cluster::settled(3);
    c.build_mut(1)["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("machineConfig");
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 1), [Keep::PoolConfiguration]);
    assert!(
        plan.build(&name(1)).expect("1").why[0]
            .text
            .contains("names no rendered config")
    );
    assert_eq!(deletable(&plan), names(&[2]));
}

#[test]
fn builds_being_deleted_or_of_a_config_being_deleted_or_rebuilt_are_kept() {
    let mut c = Cluster::settled(4);
    c.build_mut(1)["metadata"]["deletionTimestamp"] = json!(ago(1));
    let plan = c.plan(keep(0));
    assert_eq!(reasons(&plan, 1), [Keep::BeingDeleted]);
    assert_eq!(deletable(&plan), names(&[2, 3]));

    let mut c = Cluster::settled(4);
    c.moscs[0]["metadata"]["deletionTimestamp"] = json!(ago(1));
    let plan = c.plan(keep(0));
    assert!(deletable(&plan).is_empty());
    assert!(reasons(&plan, 1).contains(&Keep::ConfigBeingDeleted));

    let mut c = Cluster::settled(4);
    c.moscs[0]["metadata"]["annotations"]["machineconfiguration.openshift.io/rebuild"] = json!("");
    let plan = c.plan(keep(0));
    assert!(deletable(&plan).is_empty());
    assert_eq!(reasons(&plan, 2), [Keep::RebuildPending]);
}

#[test]
fn a_build_without_the_config_label_or_with_a_foreign_tag_is_kept() {
    let mut c = Cluster::settled(4);
    c.build_mut(1)["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove(LABEL_MACHINE_OS_CONFIG);
    c.build_mut(2)["spec"]["renderedImagePushSpec"] = json!(format!("{REPO}:latest"));
    c.build_mut(3)["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("renderedImagePushSpec");
    let plan = c.plan(keep(0));
    // Its MachineOSConfig is still known from its spec.
    assert_eq!(reasons(&plan, 1), [Keep::NoConfigLabel]);
    assert_eq!(
        plan.build(&name(1)).expect("1").config.as_deref(),
        Some("worker")
    );
    assert_eq!(reasons(&plan, 2), [Keep::TagNotItsOwn]);
    assert!(
        plan.build(&name(2)).expect("2").why[0]
            .text
            .contains(":latest is not its own name")
    );
    assert_eq!(reasons(&plan, 3), [Keep::TagNotItsOwn]);
    assert!(deletable(&plan).is_empty());
}

#[test]
fn an_image_a_kept_build_carries_keeps_every_build_that_would_delete_it() {
    // 4.20's reuse for a change that needs no new image: build 4 carries build 3's image.
    // Build 4 is kept (newest), so 3 is too; 2 carries the same image as 1, neither kept.
    let mut c = Cluster::settled(5);
    c.build_mut(4)["status"]["digestedImagePushSpec"] = json!(img(3));
    c.build_mut(2)["status"]["digestedImagePushSpec"] = json!(img(1));
    let plan = c.plan(keep(2));
    assert_eq!(reasons(&plan, 3), [Keep::SharesImage]);
    let why = &plan.build(&name(3)).expect("3").why[0].text;
    assert!(
        why.contains(&name(4)) && why.contains("every tag on it"),
        "{why}"
    );
    assert_eq!(deletable(&plan), names(&[1, 2]));
    // Kept through a chain: 2 shares 1's image, and 1 is kept by a node.
    c.nodes.push(on("old", 1));
    let plan = c.plan(keep(2));
    assert_eq!(reasons(&plan, 1), [Keep::NodeNeedsImage]);
    assert!(reasons(&plan, 2).contains(&Keep::NodeNeedsImage));
    assert!(deletable(&plan).is_empty());
}

#[test]
fn builds_are_grouped_by_config_and_an_earlier_configs_build_counts_as_its_names() {
    let mut c = Cluster::settled(3);
    // Pool infra with its own config and two builds; an orphan of an earlier worker config.
    let mut infra_mosc = mosc(1);
    infra_mosc["metadata"] = json!({"name": "infra", "uid": "uid-infra"});
    infra_mosc["spec"]["machineConfigPool"]["name"] = json!("infra");
    infra_mosc["status"]["currentImagePullSpec"] = json!(img(0x22));
    c.moscs.push(infra_mosc);
    for (n, minutes) in [(0x21, 3000), (0x22, 2000)] {
        let mut b = build(n, minutes);
        b["metadata"]["labels"][LABEL_MACHINE_OS_CONFIG] = json!("infra");
        b["spec"]["machineOSConfig"]["name"] = json!("infra");
        c.builds.push(b);
    }
    let mut orphan = build(9, 9000);
    orphan["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("ownerReferences");
    c.builds.push(orphan);
    let plan = c.plan(keep(1));
    assert_eq!(reasons(&plan, 0x22), [Keep::CurrentBuild, Keep::Newest]);
    assert_eq!(
        deletable(&plan),
        names(&[0x21, 9, 1, 2]),
        "by config, oldest first: {plan:#?}"
    );
    let plan = c.plan(keep(4));
    // The orphan is the 4th newest of worker's four.
    assert_eq!(reasons(&plan, 9), [Keep::Newest]);
}

#[test]
fn disagreeing_copies_keep_a_build_any_combination_keeps() {
    let c = Cluster::settled(5);
    let mut other = Cluster::settled(5);
    other.nodes.push(on("old", 1));
    let merged = most_cautious(vec![c.plan(defaults()), other.plan(defaults())]).expect("a plan");
    assert_eq!(deletable(&merged), names(&[2]));
    assert_eq!(reasons(&merged, 1), [Keep::NodeNeedsImage]);
    assert!(most_cautious(Vec::new()).is_none());
}

#[test]
fn builds_created_in_the_same_second_as_the_last_one_kept_are_kept_with_it() {
    let mut c = Cluster::settled(5);
    for n in [2, 3, 4] {
        c.build_mut(n)["metadata"]["creationTimestamp"] = json!(ago(600));
    }
    // --keep 2: 5, then 4, 3 and 2 (the same second as 4); 1 is older.
    let plan = c.plan(keep(2));
    assert_eq!(deletable(&plan), names(&[1]));
    assert!(reasons(&plan, 2).contains(&Keep::Newest));
    // More revisions asked for than there are: every one is kept.
    assert!(c.plan(keep(9)).deletable().next().is_none());
}
