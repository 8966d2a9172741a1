//! Which answer a registry's replies are: the one decision of registry truth, pure and
//! table-tested. It follows MCO's image pruner (`imagepruner/errors.go`), with one addition: a
//! "not found" counts only after the host's `/v2/` answered as a registry, so a web server or a
//! proxy's 404 page is never taken for a registry that lost the image.
//!
//! - **available**: the manifest was served (with the digest asked for, when it can be checked).
//! - **missing**: HTTP 404 with the registry's own `MANIFEST_UNKNOWN` or `NAME_UNKNOWN`, or
//!   `UNKNOWN` saying "not found" (Red Hat, Harbor), "deleted" or "expired" (Quay).
//! - **unknown**: everything else: refused credentials (401/403, a token service that refused),
//!   429, 5xx, a 404 without a registry error, TLS and network errors, too large, another manifest.
//!
//! Over every place a node pulls from ([`combine`]): available when one serves it, missing only
//! when every place said missing, else unknown (a lost mirror beside an unreachable source is
//! unknown, never missing).

use serde::{Deserialize, Serialize};

/// The three answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Available,
    Missing,
    Unknown,
}

impl Status {
    /// The word used in text, JSON and metric labels.
    pub fn label(self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Missing => "missing",
            Status::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// How the host answered `GET /v2/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ping {
    /// No HTTP answer: DNS, connection refused, TLS, proxy, timeout (the reason as words).
    Failed(String),
    /// An HTTP answer.
    Answered {
        status: u16,
        /// The `Docker-Distribution-API-Version: registry/2.0` header distribution, Quay and
        /// Harbor send.
        api_version: bool,
        /// A `WWW-Authenticate` challenge.
        challenge: bool,
    },
}

impl Ping {
    /// Whether the host answered `/v2/` as a registry: 200, or 401 with a challenge, or either
    /// with the API version header.
    pub fn is_registry(&self) -> bool {
        match self {
            Ping::Answered { status: 200, .. } => true,
            Ping::Answered {
                status: 401,
                api_version,
                challenge,
            } => *challenge || *api_version,
            _ => false,
        }
    }
}

/// One error of a registry's error body, `{"errors": [{"code", "message"}]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RegistryError {
    pub code: String,
    pub message: String,
}

/// How the host answered `GET /v2/<repository>/manifests/<digest>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// No HTTP answer (the reason as words).
    Failed(String),
    /// The token service named in the challenge refused, or could not be reached (the reason).
    TokenRefused(String),
    /// An HTTP answer.
    Answered {
        status: u16,
        /// The error body's errors (none when the body is not a registry error).
        errors: Vec<RegistryError>,
        /// For a 200: whether the body's digest is the one asked for (`None`: not checkable,
        /// another algorithm).
        digest_matches: Option<bool>,
    },
    /// The body was larger than the bound (a hostile or broken server).
    TooLarge { limit: usize },
}

/// What one place (a mirror or the source) answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// `None` when `/v2/` was not asked (a served manifest needs no ping).
    pub ping: Option<Ping>,
    /// `None` when the manifest was not asked for (the ping already failed).
    pub manifest: Option<Reply>,
}

/// An answer with its reason, in words a person can act on (never a credential).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub status: Status,
    pub why: String,
}

impl Answer {
    pub fn new(status: Status, why: impl Into<String>) -> Self {
        Answer {
            status,
            why: why.into(),
        }
    }

    /// Unknown, because `why`.
    pub fn unknown(why: impl Into<String>) -> Self {
        Answer::new(Status::Unknown, why)
    }
}

/// Error codes that say the manifest (or the whole repository) does not exist.
const NOT_FOUND_CODES: [&str; 2] = ["MANIFEST_UNKNOWN", "NAME_UNKNOWN"];
/// Words of an `UNKNOWN` error that mean not found: Red Hat registries and Harbor ("not
/// found"), Quay ("deleted", "expired").
const NOT_FOUND_WORDS: [&str; 3] = ["not found", "deleted", "expired"];

pub(super) fn says_not_found(e: &RegistryError) -> bool {
    let code = e.code.to_ascii_uppercase();
    if NOT_FOUND_CODES.contains(&code.as_str()) {
        return true;
    }
    let message = e.message.to_ascii_lowercase();
    code == "UNKNOWN" && NOT_FOUND_WORDS.iter().any(|w| message.contains(w))
}

pub(super) fn says_denied(e: &RegistryError) -> bool {
    matches!(
        e.code.to_ascii_uppercase().as_str(),
        "UNAUTHORIZED" | "DENIED"
    )
}

/// ` (CODE: message)` of the first error, to end a reason with (empty when there is none).
pub(super) fn detail(errors: &[RegistryError]) -> String {
    errors
        .first()
        .map(|e| {
            let message: String = e.message.chars().take(200).collect();
            format!(" ({}: {message})", e.code)
        })
        .unwrap_or_default()
}

/// What one place's answers come to.
pub fn judge(exchange: &Exchange) -> Answer {
    match &exchange.manifest {
        Some(Reply::Answered {
            status: 200,
            digest_matches: Some(false),
            ..
        }) => Answer::unknown(
            "served a manifest whose digest is not the one asked for (a node would refuse it)",
        ),
        Some(Reply::Answered { status: 200, .. }) => Answer::new(Status::Available, "served"),
        Some(Reply::Failed(reason)) => Answer::unknown(format!("unreachable: {reason}")),
        Some(Reply::TokenRefused(reason)) => Answer::unknown(format!(
            "the registry's token service refused the credentials: {reason}"
        )),
        Some(Reply::TooLarge { limit }) => Answer::unknown(format!(
            "the answer was larger than {limit} bytes: not a manifest"
        )),
        _ => judge_unserved(exchange),
    }
}

/// What a manifest that was not served (or not asked for) comes to, told by how `/v2/` answered.
fn judge_unserved(exchange: &Exchange) -> Answer {
    let ping_words = match &exchange.ping {
        None => return Answer::unknown("GET /v2/ was not asked"),
        Some(Ping::Failed(reason)) => return Answer::unknown(format!("unreachable: {reason}")),
        Some(Ping::Answered { status, .. }) => format!("GET /v2/ answered HTTP {status}"),
    };
    let registry = exchange.ping.as_ref().is_some_and(Ping::is_registry);
    let Some(Reply::Answered { status, errors, .. }) = &exchange.manifest else {
        return Answer::unknown(format!("not a registry: {ping_words}"));
    };
    let status = *status;
    let detail = detail(errors);
    if status == 401 || status == 403 || errors.iter().any(says_denied) {
        return Answer::unknown(format!(
            "access denied: HTTP {status}{detail}; the node's pull secret has no working credentials for it"
        ));
    }
    if status == 404 && errors.iter().any(says_not_found) {
        return if registry {
            Answer::new(
                Status::Missing,
                format!("the registry says it is gone{detail}"),
            )
        } else {
            Answer::unknown(format!(
                "HTTP 404{detail} from a host that does not answer as a registry ({ping_words})"
            ))
        };
    }
    let what = match status {
        404 => "HTTP 404 without a registry error: not a registry, or a proxy's page",
        429 => "HTTP 429: rate limited",
        500..=599 => "the registry failed",
        _ => "an unexpected answer",
    };
    Answer::unknown(format!("{what} (HTTP {status}){detail}"))
}

/// What every place a node pulls from comes to, in the node's order (mirrors, then the
/// source): available when one served it, missing when every one said missing, else unknown.
/// Each verdict is named by its place in the reason.
pub fn combine<'a>(places: impl IntoIterator<Item = (&'a str, &'a Answer)>) -> Answer {
    let places: Vec<(&str, &Answer)> = places.into_iter().collect();
    if let Some((place, _)) = places.iter().find(|(_, v)| v.status == Status::Available) {
        return Answer::new(Status::Available, format!("served by {place}"));
    }
    let words: Vec<String> = places
        .iter()
        .map(|(place, v)| format!("{place}: {}", v.why))
        .collect();
    if places.is_empty() {
        return Answer::unknown("no place to pull it from");
    }
    if places.iter().all(|(_, v)| v.status == Status::Missing) {
        return Answer::new(Status::Missing, words.join("; "));
    }
    Answer::unknown(words.join("; "))
}

#[cfg(test)]
mod tests;
