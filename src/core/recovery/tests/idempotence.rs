//! A recovery interrupted midway and planned again patches nothing twice: the node the patch
//! cancelled is recognised by its marker as waiting for its daemon; once the daemon's no-op
//! update is done (or MCO moved the node on) it is no longer listed; a reboot ends the match.

use super::*;

/// The report's cluster after the plan's patch, as the API server would store it.
fn cancelled() -> (Cluster, Marker) {
    let mut c = Cluster::report();
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].verdict);
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
    assert!(!plan.needs_attention());
    match &c.verdict_of(NODE) {
        Verdict::Cancelled { marker, waiting } => {
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
    assert!(matches!(progress(&node(&c), &marker), Progress::Waiting(w) if w.len() == 4));
    annotate(&mut c.nodes[0], LAST_APPLIED_DRAIN, Some(&uncordon));
    c.nodes[0]["spec"]["unschedulable"] = json!(false);
    assert!(matches!(progress(&node(&c), &marker), Progress::Waiting(w) if w.len() == 2));
    complete(&mut c.nodes[0]);
    assert_eq!(progress(&node(&c), &marker), Progress::Recovered);
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
        progress(&node(&c), &marker),
        Progress::MovedOn { desired_config: Some(ref d), desired_image: Some(_) } if d == "rendered-worker-9d9d"
    ));
    assert!(c.plan(None).nodes.is_empty(), "nor one MCO moved on");
}

#[test]
fn a_target_changed_while_still_degraded_is_not_a_recovery() {
    // MCO sends a new target only to a Done node: one written while the node is still
    // Degraded is someone else's edit, whatever it says.
    let (mut c, marker) = cancelled();
    let node = |c: &Cluster| -> RecoveryNode { c.snapshot().nodes[0].clone() };
    annotate(
        &mut c.nodes[0],
        DESIRED_CONFIG,
        Some("rendered-worker-9d9d"),
    );
    assert_eq!(
        progress(&node(&c), &marker),
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
        !matches!(c.verdict_of(NODE), Verdict::Cancelled { .. }),
        "not waited for as a cancelled node"
    );
}

#[test]
fn a_reboot_since_the_cancel_ends_the_match() {
    let (mut c, marker) = cancelled();
    c.nodes[0]["status"]["nodeInfo"]["bootID"] = json!("another-boot");
    assert_eq!(
        progress(&c.snapshot().nodes[0], &marker),
        Progress::Rebooted {
            was: Some(BOOT.to_string()),
            now: Some("another-boot".to_string())
        }
    );
    // Still Degraded, and the target it had is not recorded anywhere MCO reads: not this tool's.
    assert_eq!(
        c.verdict_of(NODE),
        Verdict::OutOfScope(Scope::NoImageDifference {
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
    assert_eq!(summary(&c.verdict_of(NODE)), ["recoverable"]);
}

#[test]
fn a_broken_marker_counts_as_none() {
    let (mut c, _) = cancelled();
    annotate(&mut c.nodes[0], MARKER, Some("{not json"));
    assert_eq!(
        c.verdict_of(NODE),
        Verdict::OutOfScope(Scope::NoImageDifference {
            earlier_recovery: false
        })
    );
}
