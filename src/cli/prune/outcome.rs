//! What became of each build `prune --apply` worked on ([`Applied`], as `--output json` prints
//! it under `applied`) and of each image `--images` worked on ([`AppliedImage`], under
//! `appliedImages`), told as it happens on the run's [`Clock`]. The same shape as `recover
//! --apply`'s (`cli::recover::outcome`).

use serde::Serialize;

pub(super) use crate::cli::progress::Clock;

/// Where a turn (a build's or an image's) was when Ctrl-C came.
#[derive(Clone, Copy)]
pub(super) enum Step {
    Reading,
    Deleting,
    Waiting,
}

/// Moves the current turn (its index in the run, and its step) on to `step`.
pub(super) fn set_step(current: &mut Option<(usize, Step)>, step: Step) {
    if let Some((_, s)) = current {
        *s = step;
    }
}

/// What became of one build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The API server (or, for an image, the registry) accepted the delete and it is gone.
    Deleted,
    /// Gone when re-read, or before its delete (nothing written).
    NothingToDo,
    /// The run stopped at this build; nothing more was written (the problem's stable name).
    Stopped(&'static str),
    /// The delete request failed on the way: it may or may not have been applied.
    Failed,
    /// The re-read failed: nothing written for this build.
    ReadFailed,
    /// Ctrl-C while on this build.
    Interrupted,
    /// The run stopped before this build.
    NotAttempted,
}

impl Outcome {
    /// Its name in the JSON output.
    fn name(self) -> &'static str {
        match self {
            Outcome::Deleted => "deleted",
            Outcome::NothingToDo => "nothingToDo",
            Outcome::Stopped(_) => "stopped",
            Outcome::Failed => "failed",
            Outcome::ReadFailed => "readFailed",
            Outcome::Interrupted => "interrupted",
            Outcome::NotAttempted => "notAttempted",
        }
    }

    /// In the text summary.
    pub(super) fn shout(self) -> &'static str {
        match self {
            Outcome::Deleted => "DELETED",
            Outcome::NothingToDo => "NOTHING TO DO",
            Outcome::Stopped(_) => "STOPPED",
            Outcome::Failed => "FAILED",
            Outcome::ReadFailed => "NOT READ",
            Outcome::Interrupted => "INTERRUPTED",
            Outcome::NotAttempted => "NOT ATTEMPTED",
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// What a result is about: a build, or an image (a digest and the tags on it).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Subject {
    Build {
        build: String,
    },
    Image {
        /// `host/path@digest`.
        image: String,
        /// The tags on it, as planned.
        tags: Vec<String>,
    },
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Build { build } => write!(f, "build {build}"),
            Subject::Image { image, .. } => write!(f, "image {image}"),
        }
    }
}

/// One build's (`applied[]`) or image's (`appliedImages[]`) result, as `--output json` prints
/// it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Applied {
    #[serde(flatten)]
    pub(super) subject: Subject,
    pub(super) outcome: Outcome,
    /// For `stopped`: the problem's stable name (builds: `changedSincePlan`, `refused`,
    /// `timedOut`; images: `changedSincePlan`, `refused`, `deletesUnsupported`, `stillServed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) problem: Option<&'static str>,
    pub(super) why: String,
    /// Seconds since the run started, when this build's result was known.
    pub(super) elapsed_seconds: f64,
}

impl Applied {
    pub(super) fn new(build: &str) -> Self {
        Applied::about(Subject::Build {
            build: build.to_string(),
        })
    }

    pub(super) fn image(image: String, tags: Vec<String>) -> Self {
        Applied::about(Subject::Image { image, tags })
    }

    fn about(subject: Subject) -> Self {
        Applied {
            subject,
            outcome: Outcome::NotAttempted,
            problem: None,
            why: String::new(),
            elapsed_seconds: 0.0,
        }
    }

    pub(super) fn end(mut self, clock: &Clock, outcome: Outcome, why: String) -> Self {
        if let Outcome::Stopped(problem) = outcome {
            self.problem = Some(problem);
        }
        clock.line(format!("{}: {why}", self.subject));
        self.outcome = outcome;
        self.why = why;
        self.elapsed_seconds = clock.seconds();
        self
    }

    /// Whether the run goes on to the next build (or image) after this one.
    pub(super) fn goes_on(&self) -> bool {
        matches!(self.outcome, Outcome::Deleted | Outcome::NothingToDo)
    }
}
