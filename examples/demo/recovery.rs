//! GUARD=off's way back: the admin runs `mosc-guard recover` on the degraded pool, reads its plan
//! (nothing written; the registry, asked as the node pulls, says the image is gone), then
//! `mosc-guard recover --apply --wait`; the story then checks on the
//! cluster what the command claims: the node back through its daemon's no-op update (Done,
//! uncordoned, the same boot ID), the Event recorded, and pool worker Updated and no longer
//! degraded.

use testkit::guard::GuardBin;
use testkit::kubelet::boot_id;
use testkit::mco::{self, REASON, STATE, STATE_DONE, is_unschedulable, node_annotation};
use testkit::scenario::{Cluster, pool_condition};

use crate::POOL;
use crate::narrate::{EVENT_COLUMNS, NODE_COLUMNS, heading, kubectl, mosc_guard, note, pool_line};

/// The Event `recover --apply` records on the node before its patch.
const EVENT_REASON: &str = "LostImageTargetCancelled";

/// Plays the recovery of `node` (stuck on the lost image); adds what went wrong to `problems`.
pub(crate) async fn recover(
    cluster: &Cluster,
    bin: &GuardBin,
    node: &str,
    problems: &mut Vec<String>,
) -> testkit::Result<()> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    let before = mco::nodes(client).get(node).await?;
    let boot = boot_id(&before).unwrap_or_default().to_owned();

    heading("Step 6: the admin asks mosc-guard how to heal the pool");
    let plan = mosc_guard(bin, cp, &["recover"]).await?;
    expect(
        &plan,
        &format!("RECOVERABLE node {node}"),
        "mosc-guard recover (the plan)",
        problems,
    );
    expect(
        &plan,
        "its registry, asked as the node pulls it, says the image is gone",
        "mosc-guard recover (the registry's word)",
        problems,
    );
    note("the plan writes nothing: the node is still Degraded and cordoned");

    heading("Step 7: mosc-guard recover --apply --wait cancels the lost target");
    let run = mosc_guard(bin, cp, &["recover", "--apply", "--wait"]).await?;
    expect(
        &run,
        &format!("RECOVERED node {node}"),
        "mosc-guard recover --apply --wait",
        problems,
    );
    kubectl(cp, &["get", "nodes", "-o", NODE_COLUMNS], None).await?;
    let events = format!("reason={EVENT_REASON}");
    kubectl(
        cp,
        &[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            &events,
            "-o",
            EVENT_COLUMNS,
        ],
        None,
    )
    .await?;
    pool_line(client).await?;

    let after = mco::nodes(client).get(node).await?;
    let state = node_annotation(&after, STATE).unwrap_or_default();
    let reason = node_annotation(&after, REASON).unwrap_or_default();
    if state != STATE_DONE || !reason.is_empty() || is_unschedulable(&after) {
        problems.push(format!(
            "{node} is not back: state {state:?}, reason {reason:?}, unschedulable {}",
            is_unschedulable(&after)
        ));
    }
    let now = boot_id(&after).unwrap_or_default();
    if now != boot {
        problems.push(format!("{node} rebooted: boot ID {boot} -> {now}"));
    } else {
        note(&format!(
            "{node} is Done and schedulable again, boot ID {boot} unchanged: no reboot"
        ));
    }
    for (condition, want) in [("Updated", true), ("NodeDegraded", false)] {
        let c = pool_condition(client, POOL, condition).await?;
        if c.as_ref().map(|c| c.is_true()) != Some(want) {
            problems.push(format!(
                "pool worker's {condition} is not {}: {c:?}",
                if want { "True" } else { "False" }
            ));
        }
    }
    Ok(())
}

/// Adds a problem unless the run (exit code, output) exited 0 and printed `text`.
fn expect(run: &(Option<i32>, String), text: &str, what: &str, problems: &mut Vec<String>) {
    if run.0 != Some(0) || !run.1.contains(text) {
        problems.push(format!(
            "{what} did not exit 0 printing {text:?}: exit {:?}",
            run.0
        ));
    }
}
