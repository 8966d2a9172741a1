//! A recovery interrupted midway and planned again patches nothing twice: the node the patch
//! cancelled is recognised by its marker as waiting for its daemon; once the daemon's no-op
//! update is done (or MCO moved the node on) it is no longer listed; a reboot ends the match.

use super::*;

/// The report's cluster after the plan's patch, as the API server would store it.
fn cancelled() -> (Cluster, Marker) {
    let mut c = Cluster::report();
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    let marker = r.marker.clone();
    c.nodes[0] = patched(&c.nodes[0], &r.patch).expect("applies");
    (c, marker)
}

/// What the daemon's no-op update writes: uncordon asked and applied, Done, reason cleared.
fn complete(node: &mut Value) {
    let uncordon = format!("uncordon-{OLD_CONFIG}");
    annotate(node, DESIRED_DRAIN, Some(&uncordon));
    annotate(node, LAST_APPLIED_DRAIN, Some(&uncordon));
    node["spec"]["unschedulable"] = json!(false);
    annotate(node, STATE, Some("Done"));
    annotate(node, REASON, None);
}

#[test]
fn a_cancelled_node_is_waited_for_not_patched_again() {
    let (c, _) = cancelled();
    let plan = c.plan(None);
    assert_eq!(plan.recoverable().count(), 0, "{plan:#?}");
    let report = report::Report::new(&plan, None, Vec::new());
    assert!(report.needs_attention.is_empty());
    match &c.diagnosis_of(NODE) {
        Diagnosis::Cancelled { marker, waiting } => {
            assert_eq!(marker.annotations[DESIRED_IMAGE], img(LOST));
            assert_eq!(
                *waiting,
                [
                    "state=Degraded (want Done)".to_string(),
                    "reason set (want it cleared)".to_string(),
                    format!("desiredDrain=drain-{NEW_CONFIG} (want uncordon-{OLD_CONFIG})"),
                    format!("lastAppliedDrain=drain-{NEW_CONFIG} (want uncordon-{OLD_CONFIG})"),
                    "cordoned (want schedulable)".to_string(),
                ]
            );
        }
        other => panic!("not cancelled: {other:#?}"),
    }
}

#[test]
fn each_step_of_the_no_op_update_is_followed_to_the_end() {
    let (mut c, marker) = cancelled();
    let node = |c: &Cluster| -> RecoveryNode { c.snapshot().nodes[0].clone() };
    let uncordon = format!("uncordon-{OLD_CONFIG}");
    annotate(&mut c.nodes[0], DESIRED_DRAIN, Some(&uncordon));
    assert!(
        matches!(progress(&node(&c), &marker, &c.snapshot().objects), Progress::Waiting(w) if w.len() == 4)
    );
    annotate(&mut c.nodes[0], LAST_APPLIED_DRAIN, Some(&uncordon));
    c.nodes[0]["spec"]["unschedulable"] = json!(false);
    assert!(
        matches!(progress(&node(&c), &marker, &c.snapshot().objects), Progress::Waiting(w) if w.len() == 2)
    );
    complete(&mut c.nodes[0]);
    assert_eq!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::Recovered
    );
    assert!(
        c.plan(None).nodes.is_empty(),
        "a recovered node is not listed"
    );

    // The node controller then sends the pool's target (here: a revert without image).
    annotate(
        &mut c.nodes[0],
        DESIRED_CONFIG,
        Some("rendered-worker-9d9d"),
    );
    assert!(matches!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::MovedOn { desired_config: Some(ref d), desired_image: Some(_), degraded: false } if d == "rendered-worker-9d9d"
    ));
    assert!(c.plan(None).nodes.is_empty(), "nor one MCO moved on");
}

#[test]
fn a_target_changed_while_still_degraded_is_not_a_recovery() {
    // Still cordoned, and the pool's target is not known: not what MCO's node controller
    // writes (it sends only schedulable nodes), so someone else's edit, whatever it says.
    let (mut c, marker) = cancelled();
    let node = |c: &Cluster| -> RecoveryNode { c.snapshot().nodes[0].clone() };
    annotate(
        &mut c.nodes[0],
        DESIRED_CONFIG,
        Some("rendered-worker-9d9d"),
    );
    assert_eq!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::Retargeted {
            desired_config: Some("rendered-worker-9d9d".to_string()),
            desired_image: node(&c).desired_image().map(str::to_string),
            state: "Degraded".to_string(),
        }
    );
    assert!(
        !crate::core::recovery::progress::cancel_holds(&node(&c), &marker),
        "a re-run plans it as it is now"
    );
    assert!(
        !matches!(c.diagnosis_of(NODE), Diagnosis::Cancelled { .. }),
        "not waited for as a cancelled node"
    );
}

#[test]
fn a_reboot_since_the_cancel_ends_the_match() {
    let (mut c, marker) = cancelled();
    c.nodes[0]["status"]["nodeInfo"]["bootID"] = json!("another-boot");
    assert_eq!(
        progress(&c.snapshot().nodes[0], &marker, &c.snapshot().objects),
        Progress::Rebooted {
            was: Some(BOOT.to_string()),
            now: Some("another-boot".to_string())
        }
    );
    // Still Degraded, and the target it had is not recorded anywhere MCO reads: not this tool's.
    assert_eq!(
        c.diagnosis_of(NODE),
        Diagnosis::OutOfScope(Scope::NoImageDifference {
            earlier_recovery: true
        })
    );
}

#[test]
fn a_node_degraded_again_on_a_new_lost_image_is_planned_afresh() {
    let (mut c, _) = cancelled();
    complete(&mut c.nodes[0]);
    // Sent to a MOSC's image again and stuck again (its marker is from the first cancel).
    let node = &mut c.nodes[0];
    annotate(node, STATE, Some("Degraded"));
    annotate(node, DESIRED_IMAGE, Some(&img(LOST)));
    annotate(node, DESIRED_CONFIG, Some(NEW_CONFIG));
    annotate(node, DESIRED_DRAIN, Some(&format!("drain-{NEW_CONFIG}")));
    annotate(
        node,
        LAST_APPLIED_DRAIN,
        Some(&format!("drain-{NEW_CONFIG}")),
    );
    node["spec"]["unschedulable"] = json!(true);
    assert_eq!(summary(&c.diagnosis_of(NODE)), ["recoverable"]);
}

#[test]
fn a_broken_marker_counts_as_none() {
    let (mut c, _) = cancelled();
    annotate(&mut c.nodes[0], MARKER, Some("{not json"));
    assert_eq!(
        c.diagnosis_of(NODE),
        Diagnosis::OutOfScope(Scope::NoImageDifference {
            earlier_recovery: false
        })
    );
}

/// The window MCO moves on in (node_controller.go, daemon.go `completeUpdate`): the daemon asked
/// for the uncordon, the drain controller uncordoned, and with capacity left the node controller
/// sends the node its pool's target before the daemon's 10 s check reports Done.
fn uncordoned_while_degraded(c: &mut Cluster) {
    let uncordon = format!("uncordon-{OLD_CONFIG}");
    annotate(&mut c.nodes[0], DESIRED_DRAIN, Some(&uncordon));
    annotate(&mut c.nodes[0], LAST_APPLIED_DRAIN, Some(&uncordon));
    c.nodes[0]["spec"]["unschedulable"] = json!(false);
}

/// The pool's `spec.configuration` (what the render controller wrote).
fn configure_pool(c: &mut Cluster, pool: &str, rendered: &str) {
    let p = c
        .pools
        .iter_mut()
        .find(|p| p["metadata"]["name"] == pool)
        .expect("pool");
    p["spec"]["configuration"] = json!({"name": rendered});
}

#[test]
fn mco_sending_the_pools_target_before_the_daemon_reports_done_is_mco_moving_on() {
    let (mut c, marker) = cancelled();
    let node = |c: &Cluster| -> RecoveryNode { c.snapshot().nodes[0].clone() };
    configure_pool(&mut c, "worker", NEW_CONFIG);
    uncordoned_while_degraded(&mut c);
    // The pool left image mode: its configuration, desiredImage removed.
    annotate(&mut c.nodes[0], DESIRED_CONFIG, Some(NEW_CONFIG));
    annotate(&mut c.nodes[0], DESIRED_IMAGE, None);
    assert_eq!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::MovedOn {
            desired_config: Some(NEW_CONFIG.to_string()),
            desired_image: None,
            degraded: true,
        }
    );

    // Anything else on a node still Degraded is not MCO's: another config, an image MCO does
    // not send (no MachineOSConfig), the same target on a node still cordoned.
    let retargeted = |c: &Cluster| {
        matches!(
            progress(&node(c), &marker, &c.snapshot().objects),
            Progress::Retargeted { .. }
        )
    };
    let mut other = c.clone();
    annotate(
        &mut other.nodes[0],
        DESIRED_CONFIG,
        Some("rendered-worker-by-hand"),
    );
    assert!(retargeted(&other), "another config");
    let mut imaged = c.clone();
    annotate(&mut imaged.nodes[0], DESIRED_IMAGE, Some(&img(RAN)));
    assert!(retargeted(&imaged), "an image MCO does not send");
    let mut cordoned = c.clone();
    cordoned.nodes[0]["spec"]["unschedulable"] = json!(true);
    assert!(retargeted(&cordoned), "MCO sends only schedulable nodes");
    let mut paused = c.clone();
    paused.pools[1]["spec"]["paused"] = json!(true);
    assert!(retargeted(&paused), "MCO sends nothing while paused");
}

#[test]
fn a_layered_pool_moves_the_node_on_only_to_its_configs_current_build() {
    let (mut c, marker) = cancelled();
    let node = |c: &Cluster| -> RecoveryNode { c.snapshot().nodes[0].clone() };
    const BUILT: &str = "0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    configure_pool(&mut c, "worker", NEW_CONFIG);
    let mut config = mosc("worker");
    config["status"] = json!({"currentImagePullSpec": img(BUILT)});
    c.moscs.push(config);
    let mut build = mosb("worker-b1", "worker", &img(BUILT));
    build["spec"]["machineConfig"] = json!({"name": NEW_CONFIG});
    build["status"]["conditions"] = json!([{"type": "Succeeded", "status": "True"}]);
    c.mosbs.push(build);
    uncordoned_while_degraded(&mut c);
    annotate(&mut c.nodes[0], DESIRED_CONFIG, Some(NEW_CONFIG));
    annotate(&mut c.nodes[0], DESIRED_IMAGE, Some(&img(BUILT)));
    assert!(matches!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::MovedOn { degraded: true, .. }
    ));
    // While that build has not succeeded, MCO's node controller sends nothing.
    c.mosbs[0]["status"]["conditions"] = json!([]);
    assert!(matches!(
        progress(&node(&c), &marker, &c.snapshot().objects),
        Progress::Retargeted { .. }
    ));
}
