//! What became of each item a run worked on ([`Applied`], as `--output json` prints it under
//! `applied` or `appliedImages`), told as it happens on the run's [`Clock`], and the text
//! summary of a run.

use std::fmt::Display;

use serde::Serialize;

use super::Clock;

/// What became of one item; its name in the JSON output is the variant's, in camelCase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Outcome {
    /// The API server (or, for an image, the registry) accepted the delete and it is gone.
    Deleted,
    /// Done, reason cleared, uncordoned, same boot.
    Recovered,
    /// Its daemon finished and MCO already sent it the pool's next target.
    MovedOn,
    /// Nothing to write when re-read (gone, no longer stuck).
    NothingToDo,
    /// A request failed on the way: it may or may not have been applied (recover: also a
    /// re-read).
    Failed,
    /// The re-read failed: nothing written for this item.
    ReadFailed,
    /// Ctrl-C while on this item.
    Interrupted,
    /// The run stopped before this item.
    NotAttempted,
    /// The run stopped at this item; a person looks (the problem's stable name, which the JSON
    /// output gives as the entry's `problem`).
    #[serde(untagged, serialize_with = "stopped")]
    Stopped(&'static str),
}

/// `stopped`, in the JSON output.
fn stopped<S: serde::Serializer>(_: &&'static str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str("stopped")
}

impl Outcome {
    /// In the text summary.
    fn shout(self) -> &'static str {
        match self {
            Outcome::Deleted => "DELETED",
            Outcome::Recovered | Outcome::MovedOn => "RECOVERED",
            Outcome::NothingToDo => "NOTHING TO DO",
            Outcome::Stopped(_) => "STOPPED",
            Outcome::Failed => "FAILED",
            Outcome::ReadFailed => "NOT READ",
            Outcome::Interrupted => "INTERRUPTED",
            Outcome::NotAttempted => "NOT ATTEMPTED",
        }
    }
}

/// What an entry is about (its JSON fields come first; its `Display` opens its lines).
pub(crate) trait Subject: Display {
    /// How the summary names one the run did not reach (`this node`).
    const THIS: &'static str;
}

/// One item's result; `found`: what the turn learnt on the way (its JSON fields come last).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Applied<S, F = ()> {
    #[serde(flatten)]
    pub(crate) subject: S,
    pub(crate) outcome: Outcome,
    /// For `stopped`: the problem's stable name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<&'static str>,
    pub(crate) why: String,
    /// For `stopped`: what a person does about it.
    #[serde(skip)]
    pub(crate) to_do: String,
    /// Seconds since the run started, when this item's result was known.
    pub(crate) elapsed_seconds: f64,
    #[serde(flatten)]
    pub(crate) found: F,
}

impl<S: Subject, F: Default> Applied<S, F> {
    /// Not attempted (yet).
    pub(crate) fn new(subject: S) -> Self {
        Applied {
            subject,
            outcome: Outcome::NotAttempted,
            problem: None,
            why: String::new(),
            to_do: String::new(),
            elapsed_seconds: 0.0,
            found: F::default(),
        }
    }
}

impl<S: Subject, F> Applied<S, F> {
    /// Its result, said on `clock`.
    pub(crate) fn end(mut self, clock: &Clock, outcome: Outcome, why: String) -> Self {
        if let Outcome::Stopped(problem) = outcome {
            self.problem = Some(problem);
        }
        clock.line(format!("{}: {why}", self.subject));
        self.outcome = outcome;
        self.why = why;
        self.elapsed_seconds = clock.seconds();
        self
    }

    /// Whether the run goes on to the next item after this one.
    pub(crate) fn goes_on(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Deleted | Outcome::Recovered | Outcome::MovedOn | Outcome::NothingToDo
        )
    }
}

/// The text summary of a run's entries.
pub(crate) fn summary<'a, S: Subject + 'a, F: 'a>(
    applied: impl IntoIterator<Item = &'a Applied<S, F>>,
) -> String {
    let mut out = String::from("\nApplied:\n");
    for a in applied {
        let why = if a.why.is_empty() {
            format!("the run stopped before {}", S::THIS)
        } else {
            a.why.clone()
        };
        out.push_str(&format!(
            "  {} {} ({:.1}s): {why}\n",
            a.outcome.shout(),
            a.subject,
            a.elapsed_seconds
        ));
        if !a.to_do.is_empty() {
            out.push_str(&format!("    do: {}\n", a.to_do));
        }
    }
    out
}
