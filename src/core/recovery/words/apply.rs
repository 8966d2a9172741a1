//! The words of `recover --apply` as it goes: each step's progress line (`node <name>: ...`),
//! why a node's turn ended where it did (and what a person does then), what a wait makes of
//! what a cancelled node shows ([`seen`]: a decision, table-tested), and the Event's note.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::time::Duration;

use crate::core::image::abbreviate;
use crate::core::model::node_annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE,
};

use super::super::loss::{Loss, RegistrySaid};
use super::super::patch::NodePatch;
use super::super::progress::Progress;
use super::super::{Diagnosis, Recovery};
use super::{diagnosis, remedy, short};

/// What a person does after most stops.
const RERUN: &str = "run recover again: it re-reads and re-plans every node";

// What a turn ends with where nothing else needs saying.
pub const NOTHING_TO_APPLY: &str =
    "nothing to apply: no node is recoverable or waiting for its daemon";
pub const INTERRUPTED: &str = "interrupted (Ctrl-C): nothing is half-done (a patch is one request \
     with its marker, or none); run recover --apply again: it recognises a node it cancelled and \
     waits for it instead of patching it twice";
pub const GONE_WHEN_REREAD: &str = "gone when re-read (the node was deleted since the plan): \
     nothing to recover, nothing written";
pub const NO_LONGER_STUCK: &str = "no longer stuck on a lost image: nothing written";
pub const DELETED_BEFORE_PATCH: &str = "the node was deleted between its re-read and the patch: \
     nothing to recover, nothing written";
pub const POOL_GONE: &str = "the pool was deleted";

/// Where a node's turn stopped: its problem's stable name, why, and what a person does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    pub problem: &'static str,
    pub why: String,
    pub to_do: String,
}

fn stop(problem: &'static str, why: String, to_do: &str) -> Stop {
    Stop {
        problem,
        why,
        to_do: to_do.to_string(),
    }
}

pub fn rereading(node: &str) -> String {
    format!(
        "node {node}: re-reading it and what its plan rests on (MachineOSConfigs, \
         MachineOSBuilds, pools, MachineConfigs)"
    )
}

pub fn reread_failed(e: impl Display) -> String {
    format!("could not re-read it: {e}")
}

pub fn asking(node: &str, image: &str) -> String {
    format!(
        "node {node}: asking the registry again, as the node pulls, whether {} is gone",
        abbreviate(image)
    )
}

pub fn registry_says(node: &str, said: &RegistrySaid) -> String {
    let label = said.label();
    format!("node {node}: the registry says {label}: {}", said.why)
}

pub fn already_cancelled(node: &str) -> String {
    format!(
        "node {node}: already cancelled by an earlier run (annotation mosc-guard.dev/recovery): \
         not patched again; waiting for its daemon"
    )
}

/// Still recoverable: what the patch is about to change, as read.
pub fn before_patch(node: &str, annotations: &BTreeMap<String, String>) -> String {
    format!(
        "node {node}: still recoverable; before the patch: {} (every MCO annotation is recorded \
         in mosc-guard.dev/recovery and in the JSON output)",
        shown(annotations)
    )
}

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
    .map(|key| {
        let value = annotations.get(key).map_or("<none>", String::as_str);
        format!("{}={value}", short(key))
    })
    .join(", ")
}

/// The Event recorded (`default/<name>`): the line, and what the JSON output says.
pub fn event_recorded(node: &str, name: &str) -> (String, String) {
    (
        format!("node {node}: recorded Event default/{name}"),
        format!("default/{name}"),
    )
}

/// The Event not recorded: the line, and what the JSON output says.
pub fn event_not_recorded(node: &str, e: impl Display) -> (String, String) {
    (
        format!(
            "node {node}: could not record the Event ({e}); continuing: the patch records the \
             same annotations in mosc-guard.dev/recovery"
        ),
        format!("not written: {e}"),
    )
}

/// The patch about to be sent; `planned`: the plan showed this very patch (named, rather than
/// printed again).
pub fn patching(node: &str, patch: &NodePatch, planned: bool) -> String {
    if planned {
        format!(
            "node {node}: patching with the plan's patch ({} operations: tests of what was read, \
             the target cancelled, the marker)",
            patch.ops.len()
        )
    } else {
        format!(
            "node {node}: patching (the node changed since the plan in ways its rules allow, so \
             the patch tests what was read now): {}",
            patch.command(node)
        )
    }
}

pub fn patched(node: &str, timeout: Duration) -> String {
    format!(
        "node {node}: patched; waiting up to {} for its daemon's no-op update",
        minutes(timeout)
    )
}

pub fn patch_refused(message: &str) -> Stop {
    let why = format!(
        "the API server refused the patch: the node changed between the read and the patch \
         ({message}); nothing was written"
    );
    stop("patchRefused", why, RERUN)
}

pub fn patch_rejected(e: impl Display) -> String {
    format!("{e}; nothing was written")
}

/// The patch request failed in transit: it may still have been applied, and the re-run tells
/// (it recognises a cancelled node by its marker).
pub fn patch_failed(e: impl Display) -> String {
    format!(
        "{e}; the API server may or may not have applied it: run recover again, which \
         recognises a node it cancelled and does not patch it twice"
    )
}

/// The node re-planned as `now`, neither recoverable nor cancelled: not patched.
pub fn changed(node: &str, now: &Diagnosis) -> Stop {
    let why = format!(
        "changed since the plan, so not patched: now {}",
        diagnosis(now)
    );
    match now {
        Diagnosis::NeedsAttention(problems) => {
            let to_do: Vec<String> = problems.iter().map(|p| remedy(p, node)).collect();
            stop("changedSincePlan", why, &to_do.join("; "))
        }
        _ => stop("changedSincePlan", why, RERUN),
    }
}

/// What a wait makes of what a cancelled node shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Recovered, and why.
    Recovered(String),
    /// Recovered, and MCO has already sent it a new target.
    MovedOn(String),
    /// Not the no-op update expected: stop, a person looks.
    Stop(Stop),
    /// Still on its way: what it waits for.
    Waiting(String),
}

/// What `progress` comes to for the wait, in words.
pub fn seen(progress: &Progress) -> Seen {
    let target = |config: &Option<String>, image: &Option<String>| {
        format!(
            "desiredConfig={}, desiredImage={}",
            config.as_deref().unwrap_or("<none>"),
            image.as_deref().unwrap_or("<none>")
        )
    };
    match progress {
        Progress::Recovered => Seen::Recovered(
            "recovered: Done, reason cleared, uncordoned by its daemon, same bootID (no reboot)"
                .to_string(),
        ),
        Progress::MovedOn {
            desired_config,
            desired_image,
            degraded,
        } => {
            let target = target(desired_config, desired_image);
            Seen::MovedOn(if *degraded {
                format!(
                    "recovered: its daemon uncordoned it, and MCO's node controller sent it the \
                     pool's target ({target}) before the daemon reported Done; the daemon \
                     reports Done, then carries out that update"
                )
            } else {
                format!(
                    "recovered: its daemon finished, and MCO has already sent it the pool's next \
                     target ({target})"
                )
            })
        }
        Progress::Retargeted {
            desired_config,
            desired_image,
            state,
        } => {
            let why = format!(
                "its target changed ({}) while it is still {state}, and not to what MCO's node \
                 controller sends its pool now on an uncordoned node: not the no-op update \
                 expected; nothing more was written",
                target(desired_config, desired_image)
            );
            let to_do = "find out who changed the node's desiredConfig/desiredImage (oc get node \
                         -o yaml; the API server's audit log), then run recover again: it plans \
                         the node as it is now";
            Seen::Stop(stop("retargeted", why, to_do))
        }
        Progress::Rebooted { was, now } => {
            let why = format!(
                "the node booted since the cancel (bootID {} -> {}): not the no-op update \
                 expected; nothing more was written",
                was.as_deref().unwrap_or("<none>"),
                now.as_deref().unwrap_or("<none>")
            );
            let to_do = "look at the node and its daemon's log (oc describe node; oc -n \
                         openshift-machine-config-operator logs -l k8s-app=machine-config-daemon \
                         -c machine-config-daemon --field-selector spec.nodeName=<node>)";
            Seen::Stop(stop("rebooted", why, to_do))
        }
        Progress::Waiting(waiting) => {
            Seen::Waiting(format!("waiting for its daemon: {}", waiting.join(", ")))
        }
    }
}

pub fn node_gone() -> Stop {
    let why = "the node was deleted while waiting for it".to_string();
    stop("nodeGone", why, "nothing to recover on a deleted node")
}

pub fn unread(e: impl Display) -> String {
    format!("could not read it ({e}); retrying")
}

/// A cancelled node not done after `timeout`; `last`: what it showed last.
pub fn node_timed_out(timeout: Duration, last: &str) -> Stop {
    let why = format!(
        "not done after {}; still {last}; nothing more was written (no uncordon, no state)",
        minutes(timeout)
    );
    let to_do = "look at the daemon's log on the node; run recover --apply again to keep \
                 waiting: it recognises the node as cancelled and does not patch it twice";
    stop("timedOut", why, to_do)
}

/// A pool not finished after `timeout`; `last`: what it showed last.
pub fn pool_timed_out(timeout: Duration, last: &str) -> String {
    format!("not finished after {}; last seen: {last}", minutes(timeout))
}

/// A duration in words (`20m`, `90s`).
pub fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The note of the Event `recover --apply` records on a node right before its patch.
pub fn event_note(node: &str, r: &Recovery) -> String {
    let back = match &r.current_image {
        Some(c) => format!("back to currentImage {}", abbreviate(c)),
        None => "removed (no currentImage)".to_string(),
    };
    let before: Vec<String> = r
        .marker
        .annotations
        .iter()
        .map(|(k, v)| format!("{}={v}", short(k)))
        .collect();
    let registry = match &r.loss {
        Loss::Verified(_) => "its registry says it is gone",
        Loss::AdminVerified(_) => "the registry could not tell; the admin verified the loss",
        Loss::Unverified(_) => "the registry did not verify the loss",
    };
    format!(
        "mosc-guard recover is about to cancel the failed target of node {node}: desiredImage {} (no \
         MachineOSBuild carries it; {registry}) {back}, desiredConfig {} back to {}. Before the \
         patch (also in annotation mosc-guard.dev/recovery): bootID={}; {}",
        abbreviate(&r.image),
        r.desired_config,
        r.current_config,
        r.marker.boot_id.as_deref().unwrap_or("<none>"),
        before.join("; ")
    )
}
