//! What `recover --apply` reports as it goes: progress lines on stderr with the time since the
//! run started ([`Clock`]), and what became of each node ([`Applied`], as `--output json` prints
//! it under `applied`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::core::recovery::RegistrySaid;

pub(super) use crate::cli::progress::Clock;

/// What became of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Done, reason cleared, uncordoned, same boot.
    Recovered,
    /// Its daemon finished and MCO already sent it the pool's next target.
    MovedOn,
    /// No longer stuck when re-read (nothing written).
    NothingToDo,
    /// The run stopped at this node; a person looks (the problem's stable name).
    Stopped(&'static str),
    /// A read or write failed (exit status 2).
    Failed,
    /// Ctrl-C while on this node.
    Interrupted,
    /// The run stopped before this node.
    NotAttempted,
}

impl Outcome {
    /// Its name in the JSON output.
    fn name(self) -> &'static str {
        match self {
            Outcome::Recovered => "recovered",
            Outcome::MovedOn => "movedOn",
            Outcome::NothingToDo => "nothingToDo",
            Outcome::Stopped(_) => "stopped",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
            Outcome::NotAttempted => "notAttempted",
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// One node's result, as `--output json` prints it under `applied`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Applied {
    pub(super) node: String,
    pub(super) pool: Option<String>,
    pub(super) outcome: Outcome,
    /// For `stopped`: the problem's stable name (as in `needsAttention[].problems`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) problem: Option<&'static str>,
    pub(super) why: String,
    #[serde(skip)]
    pub(super) to_do: String,
    /// Seconds since the run started, when this node's result was known.
    pub(super) elapsed_seconds: f64,
    /// The Event recorded on the node (`default/<name>`), or why it could not be.
    pub(super) event: Option<String>,
    /// MCO's annotations as read right before the patch was attempted (absent if none was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) recorded: Option<BTreeMap<String, String>>,
    /// What the registry said of the node's image when it was asked again right before the
    /// patch (absent when it was not asked: the node was no longer stuck on a lost image).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) registry: Option<RegistrySaid>,
}

impl Applied {
    pub(super) fn new(node: &str, pool: Option<&str>) -> Self {
        Applied {
            node: node.to_string(),
            pool: pool.map(str::to_string),
            outcome: Outcome::NotAttempted,
            problem: None,
            why: String::new(),
            to_do: String::new(),
            elapsed_seconds: 0.0,
            event: None,
            recorded: None,
            registry: None,
        }
    }

    pub(super) fn end(mut self, clock: &Clock, outcome: Outcome, why: String) -> Self {
        if let Outcome::Stopped(problem) = outcome {
            self.problem = Some(problem);
        }
        clock.line(format!("node {}: {why}", self.node));
        self.outcome = outcome;
        self.why = why;
        self.elapsed_seconds = clock.seconds();
        self
    }

    pub(super) fn stop(
        self,
        clock: &Clock,
        problem: &'static str,
        why: String,
        to_do: &str,
    ) -> Self {
        let mut a = self.end(clock, Outcome::Stopped(problem), why);
        a.to_do = to_do.to_string();
        a
    }

    /// Whether the run goes on to the next node after this one.
    pub(super) fn goes_on(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Recovered | Outcome::MovedOn | Outcome::NothingToDo
        )
    }
}

/// A duration in words (`20m`, `90s`).
pub(super) fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}
