//! The `check` command's output: the verdict as text (the webhook's own words) or as
//! JSON with a stable schema (documented in docs/cli.md).

use serde::Serialize;

use crate::core::message;
use crate::core::policy::{
    BlockingNode, GuardedImage, JoiningMachine, PolicyMode, RollingPool, TargetKind, Verdict,
};
use crate::core::registry::Status;
use crate::core::registry::report::{ProtectedImage, already_missing};
use crate::core::release::Rules;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    pub target: Target<'a>,
    pub allowed: bool,
    pub policy: PolicyMode,
    pub overridden: bool,
    pub images: &'a [GuardedImage],
    pub blocking_nodes: &'a [BlockingNode],
    pub rolling_pools: &'a [RollingPool],
    pub joining_machines: &'a [JoiningMachine],
    pub release: ReleaseReport<'a>,
    pub warnings: Vec<String>,
    /// What the registry answered for each guarded image, asked as a node pulls (live `check`
    /// only; absent when the registry was not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<Vec<ProtectedImage>>,
}

/// The release(s) whose rules decided.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseReport<'a> {
    /// The release the cluster runs or upgrades to, as read or given (`null` when neither says).
    pub version: Option<&'a str>,
    /// Releases an upgrade in flight may still be running (MCO's builder of the previous one).
    pub also_running: &'a [String],
    /// Whether the ClusterVersion says an upgrade is in flight.
    pub upgrading: bool,
    /// The table rows that decided, oldest first: `4.19` to `4.23`, or `unknown` (the cautious
    /// rules); two or more while an upgrade is in flight (the most cautious of each).
    pub rules: Vec<&'static str>,
}

impl<'a> ReleaseReport<'a> {
    /// What `rules` say about the release (also `prune`'s report).
    pub fn of(rules: &'a Rules) -> Self {
        ReleaseReport {
            version: rules.version.as_deref(),
            also_running: &rules.also_running,
            upgrading: rules.upgrading,
            rules: rules.row_names(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Target<'a> {
    pub kind: TargetKind,
    pub name: &'a str,
}

impl<'a> Report<'a> {
    /// `warnings` are notes about the source (e.g. APIs the cluster does not serve);
    /// the override warnings the webhook would return are added here.
    pub fn new(verdict: &'a Verdict, mut warnings: Vec<String>) -> Self {
        warnings.extend(verdict.rules.note());
        warnings.extend(message::override_warnings(verdict));
        Report {
            target: Target {
                kind: verdict.kind,
                name: &verdict.name,
            },
            allowed: verdict.allowed,
            policy: verdict.mode,
            overridden: verdict.overridden(),
            images: &verdict.images,
            blocking_nodes: &verdict.blocking,
            rolling_pools: &verdict.rolling,
            joining_machines: &verdict.joining,
            release: ReleaseReport::of(&verdict.rules),
            warnings,
            registry: None,
        }
    }

    /// The registry's answers for the guarded images; an image already gone adds a warning.
    pub fn with_registry(mut self, served: Vec<ProtectedImage>) -> Self {
        let missing = served.iter().filter(|s| s.status == Status::Missing);
        self.warnings.extend(missing.map(already_missing));
        self.registry = Some(served);
        self
    }
}

/// `check --all` as text: one line per target, its verdict and why.
pub fn table(verdicts: &[Verdict]) -> String {
    let rows: Vec<[String; 4]> = verdicts
        .iter()
        .map(|v| {
            let (delete, why) = if !v.allowed {
                ("refused", format!("{}{}", message::summary(v), named(v)))
            } else if v.overridden() {
                let reason = v.override_reason.as_deref().unwrap_or_default();
                ("allowed", format!("override: {reason}"))
            } else {
                ("allowed", "-".to_string())
            };
            [
                v.kind.cli_name().to_string(),
                v.name.clone(),
                delete.to_string(),
                why,
            ]
        })
        .collect();
    columns(["KIND", "NAME", "DELETE", "WHY"], &rows)
}

/// A text table: `head`, then `rows`, every column but the last padded to its widest cell.
pub fn columns<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let head = head.map(str::to_string);
    let width = |c: usize| {
        std::iter::once(&head)
            .chain(rows)
            .map(|r| r[c].chars().count())
            .max()
            .unwrap_or(0)
    };
    let mut widths: Vec<usize> = (0..N).map(width).collect();
    if let Some(last) = widths.last_mut() {
        *last = 0; // the last column is not padded
    }
    let mut out = String::new();
    for row in std::iter::once(&head).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect();
        out.push_str(&cells.join("  "));
        out.push('\n');
    }
    out
}

/// `: a, b, c (+N more)`: the nodes, then the joining machines, a refusal waits for, so one
/// line of `check --all` says where to look; empty when it waits only for a pool.
fn named(v: &Verdict) -> String {
    const SHOWN: usize = 3;
    let names: Vec<&str> = v
        .blocking
        .iter()
        .map(|b| b.node.as_str())
        .chain(v.joining.iter().map(|m| m.machine.as_str()))
        .collect();
    if names.is_empty() {
        return String::new();
    }
    let more = match names.len().saturating_sub(SHOWN) {
        0 => String::new(),
        more => format!(" (+{more} more)"),
    };
    format!(": {}{more}", names[..names.len().min(SHOWN)].join(", "))
}

/// Human-readable verdict: the denial message when blocked, a one-line summary and any
/// override warnings when allowed.
pub fn text(verdict: &Verdict) -> String {
    if !verdict.allowed {
        return message::denial(verdict);
    }
    let kind = verdict.kind.cli_name();
    let mut out = if verdict.overridden() {
        format!(
            "{kind} \"{}\" can be deleted: the override annotation allows it (policy {}).",
            verdict.name, verdict.mode
        )
    } else {
        let what = message::images_phrase(verdict.kind);
        format!(
            "{kind} \"{}\" can be deleted: no node still needs {what}, no pool is rolling one out and no joining machine pulls one (policy {}).",
            verdict.name, verdict.mode
        )
    };
    out.push('\n');
    out.push_str(&verdict.rules.decided_by());
    for w in message::override_warnings(verdict) {
        out.push_str("\nwarning: ");
        out.push_str(&w);
    }
    out
}

#[cfg(test)]
mod tests;
