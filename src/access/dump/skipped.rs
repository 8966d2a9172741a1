//! Why a file, document or object of a dump was skipped: one type for every reason the reader
//! gives, so the messages `check --from-dir` prints are written once, here.

use crate::core::model::{GROUP, VERSION};

/// A file, document or object that could not be read; its text is the reason as reported.
#[derive(Debug, thiserror::Error)]
pub(super) enum Skipped {
    #[error("UTF-16 text, not UTF-8 (re-save it as UTF-8)")]
    Utf16,
    #[error("not UTF-8 text: {0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    /// Flow collections nested deeper than the YAML parser can refuse in linear time.
    #[error("not read: YAML flow collections nested more than {limit} levels deep")]
    TooDeep { limit: usize },
    #[error("not valid YAML: {0}")]
    Yaml(serde_yaml_ng::Error),
    /// YAML that has no JSON form (a non-string mapping key, say).
    #[error("not a JSON-like document: {0}")]
    NotJsonLike(serde_json::Error),
    #[error("not a Kubernetes object (found {found})")]
    NotAnObject { found: &'static str },
    #[error("not a Kubernetes object (no apiVersion/kind)")]
    NoKind,
    #[error("{kind} without metadata.name")]
    NoName { kind: String },
    /// One of the MCO kinds in another API version than the one the model decodes.
    #[error("{api_version} {kind} {name} is not supported (only {GROUP}/{VERSION})")]
    Unsupported {
        api_version: String,
        kind: String,
        name: String,
    },
    /// One of our kinds that does not decode into the model; `part` is what was decoded
    /// when not the whole object.
    #[error(
        "{kind} {name}: cannot decode{}: {reason}",
        .part.map(|p| format!(" {p}")).unwrap_or_default()
    )]
    Decode {
        kind: String,
        name: String,
        part: Option<&'static str>,
        reason: serde_json::Error,
    },
    /// An item of a list (1-based).
    #[error("{list} item {index}: {reason}")]
    Item {
        list: String,
        index: usize,
        reason: Box<Skipped>,
    },
    /// A document of a file with several (1-based).
    #[error("document {index}: {reason}")]
    Document { index: usize, reason: Box<Skipped> },
    /// Several problems, told by the first; `items` when they are a list's items.
    #[error("{first} (and {more} more{})", .items.then_some(" items").unwrap_or_default())]
    Several {
        first: Box<Skipped>,
        more: usize,
        items: bool,
    },
}

impl Skipped {
    /// [`Skipped::Decode`] of the object `name` (as `name_in` gives it), for `map_err`.
    pub(super) fn decode(
        kind: &str,
        name: String,
        part: Option<&'static str>,
    ) -> impl FnOnce(serde_json::Error) -> Skipped {
        let kind = kind.to_string();
        move |reason| Skipped::Decode {
            kind,
            name,
            part,
            reason,
        }
    }

    /// One reason for all of `problems`: none, the only one, or the first and a count.
    pub(super) fn first_of(problems: Vec<Skipped>, items: bool) -> Option<Skipped> {
        let more = problems.len().checked_sub(1)?;
        let first = problems.into_iter().next()?;
        Some(match more {
            0 => first,
            more => Skipped::Several {
                first: Box::new(first),
                more,
                items,
            },
        })
    }
}
