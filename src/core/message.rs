//! Words for verdicts: the denial an admin reads on `kubectl delete`, an override's warnings, and
//! the refusal when the guard cannot verify. Every front end renders through here, so the webhook
//! and `check` say the same thing.

use std::fmt::Write;

use crate::core::finalizer::FINALIZER;
use crate::core::image::abbreviate;
use crate::core::model::{LABEL_MACHINE_OS_CONFIG, OVERRIDE_ANNOTATION};
use crate::core::policy::{
    BlockReason, BlockingNode, JoiningMachine, PolicyMode, RollingPool, TargetKind, Verdict,
};

/// Nodes listed by name before "and N more".
pub const MAX_LISTED_NODES: usize = 5;
/// The API server truncates longer warnings.
const MAX_WARNING_LEN: usize = 256;

/// The message for a blocked deletion (the verdict must have blocking nodes).
pub fn denial(v: &Verdict) -> String {
    let n = v.blocking.len();
    let kind = v.kind.cli_name();
    let mut out = format!(
        "{kind} \"{}\" cannot be deleted yet: {}.\n",
        v.name,
        summary(v)
    );
    let reasons = listed(&v.blocking, node_line, "")
        .chain(v.rolling.iter().map(pool_line))
        .chain(listed(&v.joining, machine_line, " machines"));
    for line in reasons {
        let _ = writeln!(out, "  {line}");
    }
    let in_flight =
        !v.rolling.is_empty() || v.blocking.iter().any(|b| b.reason == BlockReason::InFlight);
    if !in_flight && !v.joining.is_empty() && v.blocking.is_empty() {
        let _ = writeln!(out, "{}", joining_advice(v));
        let _ = writeln!(out, "Or override with:");
    } else if in_flight {
        let (images, nodes, fail) = match n {
            0 => ("that image", "the pool's next node", "fails"),
            1 => ("that image", "the node", "fails"),
            _ => ("those images", "the nodes", "fail"),
        };
        if v.rules.keeps_in_use_images {
            // 4.23's MOSB-delete path keeps an image the build's own pool uses (#6348), so
            // "removes" would be wrong for exactly the node named above.
            let _ = writeln!(
                out,
                "Deleting it now leaves {images} to MCO {}'s in-use check, which keeps (and leaks) an image only while its cache shows a node of the build's own pool using it, spelled exactly so; a node it misses fails \"manifest unknown\" (the pool goes Degraded).",
                v.rules.row_names().join("/")
            );
        } else {
            let _ = writeln!(
                out,
                "Deleting it now removes {images} from the registry and {nodes} {fail} \"manifest unknown\" (the pool goes Degraded)."
            );
        }
        if !v.joining.is_empty() {
            let _ = writeln!(out, "{}", joining_advice(v));
        }
        let pools = pools(v);
        if pools.is_empty() {
            let _ = writeln!(
                out,
                "Wait until those nodes report state Done on that image, then delete again, or override with:"
            );
        } else if v.rolling.is_empty() {
            // No pool rule: MCO sends no further node to the image (the nodes named are all it
            // sent), so the pool may never show UPDATED=True (a new config's build failed).
            let _ = writeln!(
                out,
                "Wait until those nodes report state Done on that image (`oc get mcp {pools}` shows the pool's progress), then delete again, or override with:"
            );
        } else {
            let rolling: Vec<&str> = v.rolling.iter().map(|p| p.pool.as_str()).collect();
            let _ = writeln!(
                out,
                "Wait until `oc get mcp {pools}` shows UPDATED=True with every machine updated, then delete again; \
                 or stop the rollout first (`oc patch mcp {} --type merge -p '{{\"spec\":{{\"paused\":true}}}}'`) \
                 and delete once the nodes already updating are done; or override with:",
                rolling.join(" ")
            );
        }
    } else {
        let _ = writeln!(
            out,
            "Policy in-use blocks while any node runs an image built from it, so this deletion stays blocked until those nodes move to another image. Override with:"
        );
    }
    let _ = writeln!(
        out,
        "  oc annotate {kind} {} {OVERRIDE_ANNOTATION}=\"<reason>\"",
        v.name
    );
    out.push_str(&v.rules.decided_by());
    out
}

/// Warnings returned when the override let a blocked deletion through.
pub fn override_warnings(v: &Verdict) -> Vec<String> {
    if !v.overridden() {
        return Vec::new();
    }
    let mut warnings = vec![clip(format!(
        "mosc-guard: {} \"{}\" deleted by override ({OVERRIDE_ANNOTATION}=\"{}\") although {}; expect \"manifest unknown\" and a Degraded pool",
        v.kind.cli_name(),
        v.name,
        v.override_reason.as_deref().unwrap_or_default(),
        summary(v)
    ))];
    warnings.extend(
        listed(&v.blocking, node_line, " nodes")
            .chain(v.rolling.iter().map(pool_line))
            .chain(v.joining.iter().map(machine_line))
            .map(|line| clip(format!("mosc-guard: {line}"))),
    );
    if v.kind == TargetKind::MachineOSConfig {
        // MCO's MOSC-delete path deletes each build's image before it tries the build: the
        // guard refusing the builds' deletions does not keep their images.
        warnings.push(if v.rules.keeps_in_use_images {
            "mosc-guard: the images go all the same, except those nodes of the build's pool use, which MCO keeps (and leaks): other pools' nodes, other spellings and joining machines lose theirs".to_string()
        } else {
            "mosc-guard: the images go all the same: MCO deletes each image from the registry before it tries to delete its MachineOSBuild, which mosc-guard keeps refusing while a node needs it (the builds stay behind)".to_string()
        });
        warnings.push(clip(format!(
            "mosc-guard: to let the builds go too: oc annotate machineosbuild -l {LABEL_MACHINE_OS_CONFIG}={} {OVERRIDE_ANNOTATION}=\"<reason>\"",
            v.name
        )));
    }
    warnings
}

/// The refusal when a would-be allow could not be confirmed against the API server.
pub fn unverified(kind: TargetKind, name: &str, why: &str) -> String {
    let kind = kind.cli_name();
    format!(
        "{kind} \"{name}\" cannot be deleted right now: mosc-guard could not verify that no node still needs its images ({why}). \
         The guard fails closed because deleting an image a node still needs degrades the pool. \
         Retry in a moment; if the API server stays unreachable, override with: oc annotate {kind} {name} {OVERRIDE_ANNOTATION}=\"<reason>\""
    )
}

/// The warning when the override lets through a deletion the guard could not verify.
pub fn unverified_override(kind: TargetKind, name: &str, why: &str, reason: &str) -> String {
    clip(format!(
        "mosc-guard: {} \"{name}\" deleted by override ({OVERRIDE_ANNOTATION}=\"{reason}\") without verification: {why}",
        kind.cli_name()
    ))
}

/// The warning kubectl prints when defer mode accepts a deletion that nodes still block.
pub fn deferred(v: &Verdict) -> String {
    clip(format!(
        "mosc-guard: deletion of {} \"{}\" deferred: {} ({}); it completes when the rollout settles",
        v.kind.cli_name(),
        v.name,
        summary(v),
        node_names(v, 3)
    ))
}

/// The note of the DeletionDeferred Event: which nodes the finalizer waits for.
pub fn deferred_note(v: &Verdict) -> String {
    let mut out = format!(
        "Deletion deferred: {}; mosc-guard removes its finalizer ({FINALIZER}) when the rollout settles.",
        summary(v)
    );
    let reasons = listed(&v.blocking, node_line, "")
        .chain(v.rolling.iter().map(pool_line))
        .chain(v.joining.iter().map(machine_line));
    for line in reasons {
        let _ = write!(out, "\n  {line}");
    }
    out
}

/// The note of the DeletionReleased Event: the finalizer removed, the deletion completing.
pub fn removed_note(overridden_by: Option<&str>) -> String {
    match overridden_by {
        Some(reason) => format!(
            "Finalizer {FINALIZER} removed by override ({OVERRIDE_ANNOTATION}=\"{reason}\"); the deletion completes now"
        ),
        None => format!(
            "No node still needs its images; finalizer {FINALIZER} removed and the deletion completes now"
        ),
    }
}

/// The note of the Event about an MCO request the guard admitted although it would have refused
/// it (`--mco-user`): `refusal` is what the guard would have answered.
pub fn admitted_for_mco(refusal: &str) -> String {
    format!(
        "Admitted as the machine-config-operator's own request: mosc-guard never refuses those, \
         because by the time MCO deletes a build it has deleted the build's image or never pushed \
         one, and a refusal only stops its build pipeline. mosc-guard would have refused it: {refusal}"
    )
}

/// Added to a denial in defer mode when the object does not carry the finalizer (created
/// before mosc-guard and not adopted yet, or `--no-new-finalizers`), so it cannot wait.
pub fn not_deferrable() -> String {
    format!(
        "\n(mosc-guard runs in defer mode, but this object does not carry the finalizer {FINALIZER} yet, so its deletion cannot be deferred; it is added within seconds unless mosc-guard is draining with --no-new-finalizers.)"
    )
}

/// Added to a refusal of an UPDATE that takes the finalizer off a MachineOSConfig being deleted.
pub fn finalizer_removal() -> String {
    format!(
        "\n(This update removes the finalizer {FINALIZER} from a MachineOSConfig being deleted, which completes its deletion now. mosc-guard removes it by itself when the rollout settles; `mosc-guard remove-finalizers --force` or the override annotation remove it earlier.)"
    )
}

/// The first [`MAX_LISTED_NODES`] of `items` as lines, then "and N more" (`noun` after it).
fn listed<T>(items: &[T], line: fn(&T) -> String, noun: &str) -> impl Iterator<Item = String> {
    let more = items.len().saturating_sub(MAX_LISTED_NODES);
    let more = (more > 0).then(|| format!("and {more} more{noun}"));
    items.iter().take(MAX_LISTED_NODES).map(line).chain(more)
}

/// "a, b, c and 2 more", or the rolling pools when no node blocks.
fn node_names(v: &Verdict, max: usize) -> String {
    if v.blocking.is_empty() {
        let pools = v.rolling.iter().map(|p| format!("pool {}", p.pool));
        let machines = v.joining.iter().map(|m| format!("machine {}", m.machine));
        return pools.chain(machines).collect::<Vec<_>>().join(", ");
    }
    let names: Vec<&str> = v
        .blocking
        .iter()
        .take(max)
        .map(|b| b.node.as_str())
        .collect();
    let mut out = names.join(", ");
    if v.blocking.len() > max {
        let _ = write!(out, " and {} more", v.blocking.len() - max);
    }
    out
}

/// How the images of a target are named in sentences.
pub fn images_phrase(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::MachineOSConfig => "an image built from it",
        TargetKind::MachineOSBuild => "its image",
    }
}

/// What a joining machine's first boot does without the image, and the ways out.
fn joining_advice(v: &Verdict) -> String {
    let (one, pulls, fails) = match v.joining.len() {
        1 => ("the machine", "pulls", "fails"),
        _ => ("the machines", "pull", "fail"),
    };
    let set = v.joining.iter().find_map(|m| m.machine_set.as_deref());
    let scale = match set {
        Some(set) => format!(
            "stop its MachineSet first (`oc scale machineset {set} -n openshift-machine-api --replicas=<machines that have joined>`, and pause any autoscaler)"
        ),
        None => "stop the scale-up first (pause the MachineSet or autoscaler that created it)"
            .to_string(),
    };
    format!(
        "Deleting it now removes the image {one} {pulls} at first boot from the Machine Config Server, and {one} {fails} to boot \
         (no Node registers; a MachineHealthCheck replaces it only after its startup timeout). \
         Wait until it has joined (`oc get machine -n openshift-machine-api` shows its NODE), or {scale}, then delete again."
    )
}

fn machine_line(m: &JoiningMachine) -> String {
    let set = m
        .machine_set
        .as_deref()
        .map(|s| format!(", MachineSet {s}"))
        .unwrap_or_default();
    let pool = if m.pool_known {
        format!("pool {}", m.pool)
    } else {
        format!("its user-data secret names no pool: counted as {}", m.pool)
    };
    format!(
        "machine {} ({}{set}, {pool}) is joining and pulls {} at first boot",
        m.machine,
        m.phase,
        abbreviate(&m.image)
    )
}

/// What blocks a deletion, in a phrase (a table row's "why", a denial's headline).
pub fn summary(v: &Verdict) -> String {
    let n = v.blocking.len();
    if n == 0 && v.rolling.is_empty() && !v.joining.is_empty() {
        let noun = match v.joining.len() {
            1 => "1 joining machine pulls".to_string(),
            k => format!("{k} joining machines pull"),
        };
        return format!("{noun} {} at first boot", images_phrase(v.kind));
    }
    if n == 0 && !v.rolling.is_empty() {
        let pools: Vec<&str> = v.rolling.iter().map(|p| p.pool.as_str()).collect();
        let (noun, verb) = match pools.len() {
            1 => ("pool", "is"),
            _ => ("pools", "are"),
        };
        return format!(
            "{noun} {} {verb} still rolling out {}",
            pools.join(", "),
            images_phrase(v.kind)
        );
    }
    let (nodes, verb, policy) = match (n, v.mode) {
        (1, PolicyMode::InFlight) => ("node", "still needs", ""),
        (_, PolicyMode::InFlight) => ("nodes", "still need", ""),
        (1, PolicyMode::InUse) => ("node", "still needs or runs", " (policy in-use)"),
        (_, PolicyMode::InUse) => ("nodes", "still need or run", " (policy in-use)"),
    };
    format!("{n} {nodes} {verb} {}{policy}", images_phrase(v.kind))
}

fn pool_line(p: &RollingPool) -> String {
    let status = match (p.updated_machines, p.machines) {
        (Some(u), Some(m)) => format!(" (pool status: {u} of {m} machines updated)"),
        _ => String::new(),
    };
    let image = abbreviate(&p.image);
    let next = match (p.pending_nodes, p.next_nodes.as_slice()) {
        (_, []) => String::new(),
        (Some(n), names) if n > names.len() => {
            format!(": {} and {} more", names.join(", "), n - names.len())
        }
        (_, names) => format!(": {}", names.join(", ")),
    };
    let pending = match p.pending_nodes {
        Some(1) => format!(": 1 node does not run it yet{next}; MCO updates it next"),
        Some(n) => {
            format!(": {n} nodes do not run it yet{next}; MCO updates them one after another")
        }
        // Decided from the index's candidates: some node of the pool is known not to run it.
        None => "; MCO updates its nodes one after another".to_string(),
    };
    format!("pool {} is rolling out {image}{status}{pending}", p.pool)
}

fn node_line(b: &BlockingNode) -> String {
    let pool = b.pool.as_deref().unwrap_or("<none>");
    let state = b.state.as_deref().unwrap_or("<none>");
    let show = |s: &Option<String>| s.as_deref().map_or("<none>".to_string(), abbreviate);
    match b.reason {
        BlockReason::InFlight => format!(
            "{} (pool {pool}, state {state}): desired {}, current {}",
            b.node,
            show(&b.desired_image),
            show(&b.current_image)
        ),
        BlockReason::InUse => format!(
            "{} (pool {pool}, state {state}): runs {}",
            b.node,
            show(&b.current_image)
        ),
    }
}

/// Distinct pools of the blocking nodes, for the `oc get mcp` hint.
fn pools(v: &Verdict) -> String {
    let mut pools: Vec<&str> = v
        .blocking
        .iter()
        .filter_map(|b| b.pool.as_deref())
        .chain(v.rolling.iter().map(|p| p.pool.as_str()))
        .collect();
    pools.sort_unstable();
    pools.dedup();
    pools.join(" ")
}

fn clip(s: String) -> String {
    clip_to(s, MAX_WARNING_LEN)
}

/// `s` cut to at most `max` bytes on a character boundary, marked with "...".
pub fn clip_to(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max.saturating_sub(3);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// A string from a request for a log field: as it is, except control characters (newlines,
/// ANSI escape sequences' ESC), which are written escaped (`\n`, `\u{1b}`).
pub struct Printable<'a>(pub &'a str);

impl std::fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}
