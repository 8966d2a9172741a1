//! What a registry's answer to `DELETE /v2/<repository>/manifests/<digest>` means: the one
//! decision of `prune --apply --images`' write, pure and table-tested.
//!
//! As MCO's image pruner reads the same answers (`pkg/controller/build/imagepruner/errors.go`,
//! containers/image underneath): "not found" (the registry's `MANIFEST_UNKNOWN` or
//! `NAME_UNKNOWN`, or the Red Hat, Harbor and Quay spellings) means the image is gone already;
//! "access denied" (401, 403, `UNAUTHORIZED`, `DENIED`, a token service that refused) means the
//! credentials may not delete. Two more answers MCO only logs, and prune must tell apart:
//!
//! - **deletes not supported**: distribution answers `405` with `UNSUPPORTED` when its storage
//!   has `delete.enabled: false` (the default), checked before anything else, so nothing was
//!   deleted; other registries answer `405` too;
//! - **failed**: anything else (5xx, 429, a network error mid-request): the registry may or may
//!   not have applied it.

use super::answer::{RegistryError, Reply, first_error, says_denied, says_not_found};

/// What one delete came to, with the reason in words (never a credential).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// 202 (or another 2xx): the registry deleted the manifest, with every tag on it.
    Deleted,
    /// The registry says it does not have it: nothing was deleted, nothing is left to delete.
    Gone(String),
    /// The registry does not allow deletes: nothing was deleted.
    Unsupported(String),
    /// The credentials may not delete (or were refused): nothing was deleted.
    Refused(String),
    /// Anything else: the registry may or may not have applied it.
    Failed(String),
}

fn detail(errors: &[RegistryError]) -> String {
    match first_error(errors) {
        e if e.is_empty() => String::new(),
        e => format!(" ({e})"),
    }
}

/// What the answer to a manifest `DELETE` means.
pub fn judge_delete(reply: &Reply) -> Deletion {
    let (status, errors) = match reply {
        Reply::Answered { status, errors, .. } => (*status, errors.as_slice()),
        Reply::TokenRefused(reason) => {
            return Deletion::Refused(format!(
                "the registry's token service refused the push secret's credentials: {reason}"
            ));
        }
        Reply::Failed(reason) => return Deletion::Failed(format!("no answer: {reason}")),
        Reply::TooLarge { limit } => {
            return Deletion::Failed(format!("an answer larger than {limit} bytes"));
        }
    };
    let detail = detail(errors);
    if (200..300).contains(&status) {
        return Deletion::Deleted;
    }
    let unsupported = errors
        .iter()
        .any(|e| e.code.eq_ignore_ascii_case("UNSUPPORTED"));
    if status == 405 || unsupported {
        return Deletion::Unsupported(format!(
            "HTTP {status}{detail}: the registry does not allow deletes (distribution: \
             storage.delete.enabled is false)"
        ));
    }
    if status == 401 || status == 403 || errors.iter().any(says_denied) {
        return Deletion::Refused(format!(
            "HTTP {status}{detail}: the push secret's credentials may not delete here"
        ));
    }
    if status == 404 && errors.iter().any(says_not_found) {
        return Deletion::Gone(format!("HTTP 404{detail}: the registry does not have it"));
    }
    Deletion::Failed(format!(
        "HTTP {status}{detail}: the registry may or may not have deleted it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, code: &str, message: &str) -> Reply {
        Reply::Answered {
            status,
            errors: if code.is_empty() {
                vec![]
            } else {
                vec![RegistryError {
                    code: code.into(),
                    message: message.into(),
                }]
            },
            digest_matches: None,
        }
    }

    #[test]
    fn the_table() {
        let deleted = |d: &Deletion| matches!(d, Deletion::Deleted);
        let gone = |d: &Deletion| matches!(d, Deletion::Gone(_));
        let unsupported = |d: &Deletion| matches!(d, Deletion::Unsupported(_));
        let refused = |d: &Deletion| matches!(d, Deletion::Refused(_));
        let failed = |d: &Deletion| matches!(d, Deletion::Failed(_));
        type Is = fn(&Deletion) -> bool;
        let cases: Vec<(&str, Reply, Is)> = vec![
            ("accepted", answered(202, "", ""), deleted),
            ("Quay's 204", answered(204, "", ""), deleted),
            (
                "distribution, deletes disabled",
                answered(405, "UNSUPPORTED", "The operation is unsupported."),
                unsupported,
            ),
            ("a bare 405", answered(405, "", ""), unsupported),
            (
                "already gone",
                answered(404, "MANIFEST_UNKNOWN", "manifest unknown"),
                gone,
            ),
            (
                "no such repository",
                answered(404, "NAME_UNKNOWN", "repository name not known"),
                gone,
            ),
            (
                "Harbor",
                answered(404, "UNKNOWN", "artifact not found"),
                gone,
            ),
            ("a 404 page", answered(404, "", ""), failed),
            (
                "pull-only credentials",
                answered(401, "UNAUTHORIZED", "authentication required"),
                refused,
            ),
            ("Quay, no delete right", answered(403, "", ""), refused),
            (
                "Docker Hub's DENIED",
                answered(404, "DENIED", "requested access to the resource is denied"),
                refused,
            ),
            (
                "token refused",
                Reply::TokenRefused("token service answered HTTP 401".into()),
                refused,
            ),
            ("server error", answered(500, "UNKNOWN", "boom"), failed),
            ("rate limited", answered(429, "", ""), failed),
            (
                "connection lost",
                Reply::Failed("connection reset".into()),
                failed,
            ),
        ];
        for (name, reply, is) in cases {
            let got = judge_delete(&reply);
            assert!(is(&got), "{name}: {got:?}");
        }
    }
}
