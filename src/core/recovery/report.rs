//! `recover --output json`: the plan as a stable schema (documented in docs/cli.md, "recover").
//! Every node the plan lists is in exactly one of `recoverable`, `cancelled`, `needsAttention`
//! and `outOfScope`; `--apply` adds the nodes it stopped at to `needsAttention`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::words;
use super::{Diagnosis, Plan, RegistrySaid};

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The pool asked for (`recover POOL`), or null for every pool.
    pub pool: Option<String>,
    pub recoverable: Vec<Recoverable>,
    pub cancelled: Vec<Cancelled>,
    pub needs_attention: Vec<Attention>,
    pub out_of_scope: Vec<OutOfScope>,
    /// Notes about the source (skipped files of a dump, APIs not served).
    pub warnings: Vec<String>,
}

/// A node the patch recovers.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recoverable {
    pub node: String,
    pub pool: String,
    /// The lost `desiredImage`.
    pub image: String,
    /// What its registry said of it, asked as the node pulls it (`status` null: not asked).
    pub registry: RegistrySaid,
    pub why: Vec<String>,
    /// The JSON patch (RFC 6902 operations).
    pub patch: Vec<Value>,
    /// The same patch as the `oc patch node` command, shell-quoted.
    pub command: String,
    /// MCO's annotations as read before the patch (what the marker and the Event record).
    pub recorded: BTreeMap<String, String>,
    #[serde(rename = "bootID")]
    pub boot_id: Option<String>,
}

/// A node an earlier run cancelled, waiting for its daemon.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled {
    pub node: String,
    pub pool: Option<String>,
    pub why: String,
    /// The steps of the no-op update not done yet.
    pub waiting_for: Vec<String>,
    /// MCO's annotations as the earlier run read them before its patch (from the marker).
    pub recorded: BTreeMap<String, String>,
}

/// A node a person must look at; never patched.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attention {
    pub node: String,
    pub pool: Option<String>,
    /// Every problem, in one text.
    pub why: String,
    /// What to do, one entry per problem.
    #[serde(rename = "do")]
    pub to_do: Vec<String>,
    /// The problems' stable names ([`words::problem_code`], and from `--apply` a
    /// [`words::apply::Stop`]'s; docs/cli.md lists them).
    pub problems: Vec<&'static str>,
    /// What the registry said of the image the node is stuck on (null when it was no question
    /// for this node: a build still carries the image, or `--apply` stopped before asking).
    pub registry: Option<RegistrySaid>,
}

/// A node listed but not this tool's.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutOfScope {
    pub node: String,
    pub pool: Option<String>,
    pub why: String,
}

impl Report {
    pub fn new(plan: &Plan, pool: Option<&str>, warnings: Vec<String>) -> Self {
        let mut report = Report {
            pool: pool.map(str::to_string),
            warnings,
            ..Default::default()
        };
        for n in &plan.nodes {
            match &n.diagnosis {
                Diagnosis::Recoverable(r) => report.recoverable.push(Recoverable {
                    node: n.node.clone(),
                    pool: n.pool.clone().unwrap_or_default(),
                    image: r.image.clone(),
                    registry: r.loss.said().clone(),
                    why: words::why_recoverable(n, r),
                    patch: r.patch.ops.clone(),
                    command: r.patch.command(&n.node),
                    recorded: r.marker.annotations.clone(),
                    boot_id: r.marker.boot_id.clone(),
                }),
                Diagnosis::Cancelled { marker, waiting } => report.cancelled.push(Cancelled {
                    node: n.node.clone(),
                    pool: n.pool.clone(),
                    why: words::cancelled(waiting),
                    waiting_for: waiting.clone(),
                    recorded: marker.annotations.clone(),
                }),
                Diagnosis::NeedsAttention(problems) => report.needs_attention.push(Attention {
                    node: n.node.clone(),
                    pool: n.pool.clone(),
                    why: words::problems_text(problems),
                    to_do: problems.iter().map(|p| words::remedy(p, &n.node)).collect(),
                    problems: problems.iter().map(words::problem_code).collect(),
                    registry: n.registry.clone(),
                }),
                Diagnosis::OutOfScope(s) => report.out_of_scope.push(OutOfScope {
                    node: n.node.clone(),
                    pool: n.pool.clone(),
                    why: words::scope(s),
                }),
            }
        }
        report
    }
}
