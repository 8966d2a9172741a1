//! One row per rule of which nodes qualify, and per case a person must see instead: each row
//! edits the report's cluster (one stuck worker, its MOSC and builds gone) and names the verdict.

use super::*;

type Edit = fn(&mut Cluster);

/// Pool worker rendering `rendered-worker-next`, a MOSC `worker` pointing at a new image, and
/// its build for that configuration with no condition yet (running).
fn configured_layered_pool(c: &mut Cluster) {
    const NEXT: &str = "rendered-worker-next";
    const BUILT: &str = "0ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
    c.pools[1]["spec"]["configuration"] = json!({"name": NEXT});
    let mut config = mosc("worker");
    config["status"] = json!({"currentImagePullSpec": img(BUILT)});
    c.moscs.push(config);
    let mut build = mosb("worker-b1", "worker", &img(BUILT));
    build["spec"]["machineConfig"] = json!({"name": NEXT});
    c.mosbs.push(build);
}

fn node0(c: &mut Cluster) -> &mut Value {
    &mut c.nodes[0]
}

#[test]
fn every_rule_and_every_case_a_person_must_see() {
    let rows: &[(&str, Edit, &[&str])] = &[
        ("the report's node qualifies", |_| {}, &["recoverable"]),
        (
            "rule 1: Working toward a lost image: the daemon still tries",
            |c| annotate(node0(c), STATE, Some("Working")),
            &["outOfScope:stillTrying"],
        ),
        (
            "rule 1: Done while targeted at a lost image: not failed yet",
            |c| annotate(node0(c), STATE, Some("Done")),
            &["outOfScope:stillTrying"],
        ),
        (
            "rule 1: no state at all, targeted at a lost image",
            |c| annotate(node0(c), STATE, None),
            &["outOfScope:stillTrying"],
        ),
        (
            "rule 1: Unreconcilable is not a lost image",
            |c| annotate(node0(c), STATE, Some("Unreconcilable")),
            &["outOfScope:unreconcilable"],
        ),
        (
            "rule 2: Degraded with desiredImage = currentImage (drift)",
            |c| annotate(node0(c), DESIRED_IMAGE, Some(&img(RAN))),
            &["outOfScope:noImageDifference"],
        ),
        (
            "rule 2: Degraded without desiredImage (a MachineConfig failure)",
            |c| annotate(node0(c), DESIRED_IMAGE, None),
            &["outOfScope:noImageDifference"],
        ),
        (
            "rule 3: a build still carries the image: registry or credentials",
            |c| c.mosbs.push(mosb("worker-a7c04d3f", "worker", &img(LOST))),
            &["imageStillCarried"],
        ),
        (
            "rule 3: a build carries it spelled with a tag and upper-case hex",
            |c| {
                let spelled = format!("{REPO}:latest@sha256:{}", LOST.to_uppercase());
                c.mosbs.push(mosb("worker-a7c04d3f", "worker", &spelled));
            },
            &["imageStillCarried"],
        ),
        (
            "rule 3: a build of another image does not carry it",
            |c| c.mosbs.push(mosb("worker-a7c04d3f", "worker", &img(RAN))),
            &["recoverable"],
        ),
        (
            "rule 4: the drain controller has not finished",
            |c| {
                annotate(
                    node0(c),
                    LAST_APPLIED_DRAIN,
                    Some(&format!("uncordon-{OLD_CONFIG}")),
                )
            },
            &["drainNotFinished"],
        ),
        (
            "rule 4: uncordoned by hand",
            |c| node0(c)["spec"]["unschedulable"] = json!(false),
            &["uncordonedByHand"],
        ),
        (
            "rule 4: never asked for this config's drain",
            |c| {
                let n = node0(c);
                annotate(n, DESIRED_DRAIN, Some(&format!("uncordon-{OLD_CONFIG}")));
                annotate(
                    n,
                    LAST_APPLIED_DRAIN,
                    Some(&format!("uncordon-{OLD_CONFIG}")),
                );
                n["spec"] = json!({});
            },
            &["notDrained"],
        ),
        (
            "rule 4: no drain annotations at all",
            |c| {
                annotate(node0(c), DESIRED_DRAIN, None);
                annotate(node0(c), LAST_APPLIED_DRAIN, None);
            },
            &["notDrained"],
        ),
        (
            "rule 4: single-node: the daemon does not drain",
            |c| {
                let n = node0(c);
                annotate(n, CONTROL_PLANE_TOPOLOGY, Some("SingleReplica"));
                annotate(n, DESIRED_DRAIN, Some(&format!("uncordon-{OLD_CONFIG}")));
                annotate(
                    n,
                    LAST_APPLIED_DRAIN,
                    Some(&format!("uncordon-{OLD_CONFIG}")),
                );
                n["spec"] = json!({});
            },
            &["recoverable"],
        ),
        (
            "rule 4: a topology MCO does not know drains (highly available)",
            |c| {
                let n = node0(c);
                annotate(n, CONTROL_PLANE_TOPOLOGY, Some("Single"));
                annotate(n, DESIRED_DRAIN, Some(&format!("uncordon-{OLD_CONFIG}")));
                n["spec"] = json!({});
            },
            &["notDrained"],
        ),
        (
            "rule 5: the desired rendered MachineConfig is gone: never read after the cancel",
            |c| c.machine_configs = Some(vec![OLD_CONFIG.to_string()]),
            &["recoverable"],
        ),
        (
            "rule 5: the current rendered MachineConfig is gone",
            |c| c.machine_configs = Some(vec![NEW_CONFIG.to_string()]),
            &["machineConfigGone"],
        ),
        (
            "rule 5: the source shows no MachineConfigs",
            |c| c.machine_configs = None,
            &["machineConfigsUnknown"],
        ),
        (
            "rule 5: no currentConfig annotation",
            |c| annotate(node0(c), CURRENT_CONFIG, None),
            &["configAnnotationMissing"],
        ),
        (
            "rule 6: a MOSC targets the pool, not paused, its pool's configuration not known",
            |c| c.moscs.push(mosc("worker")),
            &["poolTargetedNotPaused"],
        ),
        (
            "rule 6: a MOSC whose build for the pool's configuration succeeded: the loop",
            |c| {
                configured_layered_pool(c);
                c.mosbs[0]["status"]["conditions"] =
                    json!([{"type": "Succeeded", "status": "True"}]);
            },
            &["poolTargetedNotPaused"],
        ),
        (
            "rule 6: a recreated MOSC with no build for the pool's configuration yet",
            |c| {
                configured_layered_pool(c);
                c.mosbs.clear();
            },
            &["recoverable"],
        ),
        (
            "rule 6: a MOSC whose build for the pool's configuration is running",
            |c| configured_layered_pool(c),
            &["recoverable"],
        ),
        (
            "rule 6: a MOSC whose build for the pool's configuration failed",
            |c| {
                configured_layered_pool(c);
                c.mosbs[0]["status"]["conditions"] = json!([{"type": "Failed", "status": "True"}]);
            },
            &["recoverable"],
        ),
        (
            "rule 6: a MOSC targets the pool, paused",
            |c| {
                c.moscs.push(mosc("worker"));
                c.pools[1] = pool("worker", true);
            },
            &["recoverable"],
        ),
        (
            "rule 6: a MOSC targets another pool",
            |c| c.moscs.push(mosc("infra")),
            &["recoverable"],
        ),
        (
            "rule 7: the dump's copies of the node disagree",
            |c| c.disagreeing.push(NODE.to_string()),
            &["copiesDisagree"],
        ),
        (
            "every problem at once is listed, not only the first",
            |c| {
                c.moscs.push(mosc("worker"));
                node0(c)["spec"]["unschedulable"] = json!(false);
                c.machine_configs = Some(vec![NEW_CONFIG.to_string()]);
            },
            &[
                "poolTargetedNotPaused",
                "uncordonedByHand",
                "machineConfigGone",
            ],
        ),
        (
            "a node MCO places in no pool (two custom pools select it)",
            |c| {
                let labels = &mut node0(c)["metadata"]["labels"];
                labels["node-role.kubernetes.io/infra"] = json!("");
                labels["node-role.kubernetes.io/gpu"] = json!("");
                c.pools.push(pool("gpu", false));
            },
            &["outOfScope:noPool"],
        ),
    ];
    for (what, edit, want) in rows {
        let mut c = Cluster::report();
        edit(&mut c);
        assert_eq!(summary(&c.diagnosis_of(NODE)), *want, "{what}");
    }
}

#[test]
fn healthy_and_windows_nodes_are_not_listed() {
    let mut c = Cluster::report();
    let mut done = stuck("worker-b", "worker");
    annotate(&mut done, STATE, Some("Done"));
    annotate(&mut done, DESIRED_IMAGE, Some(&img(RAN)));
    let mut windows = stuck("winworker-1", "worker");
    windows["metadata"]["labels"]["kubernetes.io/os"] = json!("windows");
    annotate(&mut windows, STATE, Some("Done"));
    c.nodes.extend([done, windows]);
    let plan = c.plan(None);
    let listed: Vec<&str> = plan.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(listed, [NODE]);
}

#[test]
fn the_plan_says_what_it_decided_and_why() {
    let c = Cluster::report();
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    assert_eq!(r.drain, Drain::Drained(format!("drain-{NEW_CONFIG}")));
    let why = words::why_recoverable(&plan.nodes[0], r).join("\n");
    for part in [
        "state=Degraded",
        "no MachineOSBuild carries that image",
        &format!("desiredDrain = lastAppliedDrain = drain-{NEW_CONFIG}, node cordoned"),
        "no MachineOSConfig targets pool worker",
        "without a reboot",
    ] {
        assert!(why.contains(part), "{part:?} in\n{why}");
    }

    let mut single = Cluster::report();
    annotate(
        &mut single.nodes[0],
        CONTROL_PLANE_TOPOLOGY,
        Some("SingleReplica"),
    );
    let plan = single.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    assert_eq!(r.drain, Drain::SingleNode);
    let why = words::why_recoverable(&plan.nodes[0], r).join("\n");
    assert!(
        why.contains(
            "single-node (machineconfiguration.openshift.io/controlPlaneTopology=SingleReplica): \
             the daemon does not drain; not required"
        ),
        "{why}"
    );
}

#[test]
fn each_problem_says_what_to_do() {
    let mut c = Cluster::report();
    c.moscs.push(mosc("worker"));
    node0(&mut c)["spec"]["unschedulable"] = json!(false);
    let plan = c.plan(None);
    let report = report::Report::new(&plan, None, Vec::new());
    let attention = &report.needs_attention[0];
    assert_eq!(attention.to_do.len(), 2);
    assert!(
        attention.to_do[0]
            .contains(r#"oc patch mcp worker --type=merge -p '{"spec":{"paused":true}}'"#),
        "{:?}",
        attention.to_do
    );
    assert!(
        attention.to_do[1].contains(&format!("oc adm cordon {NODE}")),
        "{:?}",
        attention.to_do
    );
    assert!(
        attention.why.contains("uncordoned by hand"),
        "{}",
        attention.why
    );
    assert!(report.recoverable.is_empty());
    assert!(!report.needs_attention.is_empty());
}

#[test]
fn stuck_per_pool_counts_only_degraded_nodes_on_images_no_build_carries() {
    let mut c = Cluster::report();
    let mut working = stuck("worker-b", "worker");
    annotate(&mut working, STATE, Some("Working"));
    let carried_image = img("0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
    let mut carried = stuck("infra-a", "infra");
    annotate(&mut carried, DESIRED_IMAGE, Some(&carried_image));
    c.mosbs.push(mosb("infra-1", "infra", &carried_image));
    c.nodes
        .extend([working, carried, stuck("infra-b", "infra")]);
    let snap = c.snapshot();
    let lean = Snapshot {
        nodes: c
            .nodes
            .iter()
            .map(|n| Arc::new(serde_json::from_value(n.clone()).expect("node")))
            .collect(),
        ..snap.objects.clone()
    };
    let counts = stuck::stuck_per_pool(&lean);
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        [
            ("infra".to_string(), 1),
            ("master".to_string(), 0),
            ("worker".to_string(), 1)
        ]
    );
}
