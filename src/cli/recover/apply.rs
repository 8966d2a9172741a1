//! `recover --apply`: the plan carried out on the live cluster, one node at a time. For each
//! node: re-read it and what its plan rests on, ask its registry again whether its image is
//! gone ([`super::registry`]: an image served again stops the cancel), and re-plan it from that
//! read; record its
//! annotations (a progress line, and an Event on the node); apply the conditional patch; wait
//! for its daemon's no-op update ([`super::wait`]). Anything unexpected stops the run with a
//! report: the node changed since the plan, the patch was refused, the node rebooted, the wait
//! timed out. Nothing is ever escalated: no force file, no uncordon, no write of `state`,
//! `reason`, `currentConfig`, `currentImage` or the drain annotations.
//!
//! Ctrl-C leaves nothing half-done: the patch is one request that carries its own marker, so a
//! node is either untouched or cancelled and recognised as such by the next run.
//!
//! If the Event cannot be written (RBAC, a full namespace quota) the run says so and continues:
//! the Event is a convenience for `oc describe node`; the durable record of the annotations is
//! the marker the patch itself writes, in the same request as the change.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;

use crate::access::recovery::{self as live, PatchError};
use crate::cli::args::RecoverArgs;
use crate::core::image::abbreviate;
use crate::core::model::node_annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE,
};
use crate::core::recovery::{self, NodePatch, Plan, Verdict, words};
use crate::telemetry::events::{self, REASON_RECOVERY};

use super::outcome::{Applied, Clock, Outcome, minutes};
use super::registry::RegistryAsk;
use super::wait::{self, PoolWait};

/// What the run did.
#[derive(Default)]
pub(super) struct Done {
    pub(super) nodes: Vec<Applied>,
    pub(super) pools: Vec<PoolWait>,
    /// `--wait` was given and reached.
    pub(super) waited: bool,
    pub(super) failed: bool,
    pub(super) interrupted: bool,
}

/// Carries out `plan`'s recoverable (and already cancelled) nodes, in the plan's order.
pub(super) async fn run(
    client: &Client,
    plan: &Plan,
    args: &RecoverArgs,
    registry: &mut RegistryAsk,
) -> Done {
    let clock = Clock::start();
    let todo: Vec<(&str, Option<&str>)> = plan
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.verdict,
                Verdict::Recoverable(_) | Verdict::Cancelled { .. }
            )
        })
        .map(|n| (n.node.as_str(), n.pool.as_deref()))
        .collect();
    let planned = |node: &str| {
        plan.recoverable()
            .find(|(n, _)| n.node == node)
            .map(|(_, r)| &r.patch)
    };
    let mut done = Done::default();
    if todo.is_empty() {
        clock.line("nothing to apply: no node is recoverable or waiting for its daemon");
        return done;
    }
    let mut current: Option<(&str, Option<&str>)> = None;
    let interrupted = {
        let work = async {
            for (i, &(node, pool)) in todo.iter().enumerate() {
                current = Some((node, pool));
                let applied = one(
                    client,
                    &clock,
                    (node, pool),
                    planned(node),
                    registry,
                    args.timeout,
                )
                .await;
                current = None;
                let goes_on = applied.goes_on();
                done.failed |= applied.outcome == Outcome::Failed;
                done.nodes.push(applied);
                if !goes_on {
                    for &(node, pool) in &todo[i + 1..] {
                        done.nodes.push(Applied::new(node, pool));
                    }
                    return;
                }
            }
            if args.wait {
                done.waited = true;
                done.pools = wait::pools(client, &clock, &done.nodes, args.timeout).await;
            }
        };
        tokio::select! {
            () = work => false,
            _ = tokio::signal::ctrl_c() => true,
        }
    };
    if interrupted {
        done.interrupted = true;
        if let Some((node, pool)) = current {
            let why =
                "interrupted (Ctrl-C): nothing is half-done (a patch is one request with its \
                 marker, or none); run recover --apply again: it recognises a node it cancelled \
                 and waits for it instead of patching it twice"
                    .to_string();
            done.nodes
                .push(Applied::new(node, pool).end(&clock, Outcome::Interrupted, why));
        }
        // The nodes not reached are listed as when a run stops: not attempted.
        let listed = done.nodes.len();
        for &(node, pool) in todo.iter().skip(listed) {
            done.nodes.push(Applied::new(node, pool));
        }
    }
    done
}

/// One node: re-read, ask the registry again, re-plan, record, patch, wait. `planned`: the
/// patch the plan showed for it (the progress lines name it rather than print its 3 KB again).
async fn one(
    client: &Client,
    clock: &Clock,
    (node, pool): (&str, Option<&str>),
    planned: Option<&NodePatch>,
    registry: &mut RegistryAsk,
    timeout: Duration,
) -> Applied {
    let mut a = Applied::new(node, pool);
    clock.line(format!(
        "node {node}: re-reading it and what its plan rests on (MachineOSConfigs, \
         MachineOSBuilds, pools, MachineConfigs)"
    ));
    let fresh = match live::fresh_for(client, node).await {
        Ok(fresh) => fresh,
        Err(e) => return a.end(clock, Outcome::Failed, format!("could not re-read it: {e}")),
    };
    let Some(uid) = fresh.nodes.first().map(|n| n.uid.clone()) else {
        let why = "gone when re-read (the node was deleted since the plan): nothing to recover, \
                   nothing written"
            .to_string();
        return a.end(clock, Outcome::NothingToDo, why);
    };
    let images = recovery::images_to_ask(&fresh, None);
    for image in &images {
        clock.line(format!(
            "node {node}: asking the registry again, as the node pulls, whether {} is gone",
            abbreviate(image)
        ));
    }
    let (answers, _) = registry.answers(&images).await;
    let replanned = recovery::plan_node(&fresh, node, &answers);
    a.registry = replanned.as_ref().and_then(|p| p.registry.clone());
    if let Some(said) = &a.registry {
        clock.line(format!(
            "node {node}: the registry says {}: {}",
            said.label(),
            said.why
        ));
    }
    let (marker, mut a) = match replanned.map(|p| p.verdict) {
        None => {
            let why = "no longer stuck on a lost image: nothing written".to_string();
            return a.end(clock, Outcome::NothingToDo, why);
        }
        Some(Verdict::Cancelled { marker, .. }) => {
            clock.line(format!(
                "node {node}: already cancelled by an earlier run (annotation \
                 mosc-guard.dev/recovery): not patched again; waiting for its daemon"
            ));
            (marker, a)
        }
        Some(Verdict::Recoverable(r)) => {
            let mut a = a;
            clock.line(format!(
                "node {node}: still recoverable; before the patch: {} (every MCO annotation is \
                 recorded in mosc-guard.dev/recovery and in the JSON output)",
                shown(&r.marker.annotations)
            ));
            a.recorded = Some(r.marker.annotations.clone());
            let note = words::event_note(node, &r);
            a.event = Some(
                match events::node_event(
                    client.clone(),
                    node,
                    uid.as_deref(),
                    REASON_RECOVERY,
                    &note,
                )
                .await
                {
                    Ok(name) => {
                        clock.line(format!("node {node}: recorded Event default/{name}"));
                        format!("default/{name}")
                    }
                    Err(e) => {
                        clock.line(format!(
                            "node {node}: could not record the Event ({e}); continuing: the patch \
                             records the same annotations in mosc-guard.dev/recovery"
                        ));
                        format!("not written: {e}")
                    }
                },
            );
            if planned == Some(&r.patch) {
                clock.line(format!(
                    "node {node}: patching with the plan's patch ({} operations: tests of what was \
                     read, the target cancelled, the marker)",
                    r.patch.ops.len()
                ));
            } else {
                clock.line(format!(
                    "node {node}: patching (the node changed since the plan in ways its rules \
                     allow, so the patch tests what was read now): {}",
                    r.patch.command(node)
                ));
            }
            match live::patch_node(client, node, &r.patch).await {
                Ok(_) => clock.line(format!(
                    "node {node}: patched; waiting up to {} for its daemon's no-op update",
                    minutes(timeout)
                )),
                Err(PatchError::Refused(message)) => {
                    let why = format!(
                        "the API server refused the patch: the node changed between the read and \
                         the patch ({message}); nothing was written"
                    );
                    return a.stop(clock, "patchRefused", why, RERUN);
                }
                Err(PatchError::Rejected { code: 404, .. }) => {
                    let why = "the node was deleted between its re-read and the patch: nothing \
                               to recover, nothing written"
                        .to_string();
                    return a.end(clock, Outcome::NothingToDo, why);
                }
                Err(e @ PatchError::Rejected { .. }) => {
                    let why = format!("{e}; nothing was written");
                    return a.end(clock, Outcome::Failed, why);
                }
                Err(e @ PatchError::Failed(_)) => {
                    // A request that failed in transit may still have been applied: say so, and
                    // let the re-run tell (it recognises a cancelled node by its marker).
                    let why = format!(
                        "{e}; the API server may or may not have applied it: run recover again, \
                         which recognises a node it cancelled and does not patch it twice"
                    );
                    return a.end(clock, Outcome::Failed, why);
                }
            }
            (r.marker.clone(), a)
        }
        Some(other) => {
            let why = format!(
                "changed since the plan, so not patched: now {}",
                words::verdict(&other)
            );
            let to_do = match &other {
                Verdict::NeedsAttention(problems) => problems
                    .iter()
                    .map(|p| words::remedy(p, node))
                    .collect::<Vec<_>>()
                    .join("; "),
                _ => RERUN.to_string(),
            };
            return a.stop(clock, "changedSincePlan", why, &to_do);
        }
    };
    a.pool = pool.map(str::to_string);
    wait::node(client, clock, a, &marker, timeout).await
}

const RERUN: &str = "run recover again: it re-reads and re-plans every node";

/// The annotations the cancel reads and changes, on one line (`state=..., desiredImage=...`,
/// by their short names); the others (`reason` above all, the daemon's whole error) are in the
/// marker and the JSON output.
fn shown(annotations: &BTreeMap<String, String>) -> String {
    [
        STATE,
        DESIRED_IMAGE,
        CURRENT_IMAGE,
        DESIRED_CONFIG,
        CURRENT_CONFIG,
    ]
    .into_iter()
    .map(|key| {
        let short = key.rsplit('/').next().unwrap_or(key);
        let value = annotations.get(key).map_or("<none>", String::as_str);
        format!("{short}={value}")
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// The text summary of a run.
pub(super) fn summary(done: &Done) -> String {
    let mut out = String::from("\nApplied:\n");
    for a in &done.nodes {
        let outcome = match a.outcome {
            Outcome::Recovered => "RECOVERED",
            Outcome::MovedOn => "RECOVERED",
            Outcome::NothingToDo => "NOTHING TO DO",
            Outcome::Stopped(_) => "STOPPED",
            Outcome::Failed => "FAILED",
            Outcome::Interrupted => "INTERRUPTED",
            Outcome::NotAttempted => "NOT ATTEMPTED",
        };
        let why = if a.why.is_empty() {
            "the run stopped before this node".to_string()
        } else {
            a.why.clone()
        };
        out.push_str(&format!(
            "  {outcome} node {} ({:.1}s): {why}\n",
            a.node, a.elapsed_seconds
        ));
        if !a.to_do.is_empty() {
            out.push_str(&format!("    do: {}\n", a.to_do));
        }
    }
    for p in &done.pools {
        out.push_str(&format!("  pool {}: {}\n", p.pool, p.why));
    }
    out
}
