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

use super::answer::{Reply, detail, says_denied, says_not_found};

/// What one delete came to, with the reason in words (never a credential).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteAnswer {
    /// 202 (or another 2xx): the registry deleted the manifest, with every tag on it.
    Deleted,
    /// The registry says it does not have it: nothing was deleted, nothing is left to delete.
    Missing(String),
    /// The registry does not allow deletes: nothing was deleted.
    Unsupported(String),
    /// The credentials may not delete (or were refused): nothing was deleted.
    Refused(String),
    /// Anything else: the registry may or may not have applied it.
    Failed(String),
}

/// What the answer to a manifest `DELETE` means.
pub fn judge_delete(reply: &Reply) -> DeleteAnswer {
    let (status, errors) = match reply {
        Reply::Answered { status, errors, .. } => (*status, errors.as_slice()),
        Reply::TokenRefused(reason) => {
            return DeleteAnswer::Refused(format!(
                "the registry's token service refused the push secret's credentials: {reason}"
            ));
        }
        Reply::Failed(reason) => return DeleteAnswer::Failed(format!("no answer: {reason}")),
        Reply::TooLarge { limit } => {
            return DeleteAnswer::Failed(format!("an answer larger than {limit} bytes"));
        }
    };
    let detail = detail(errors);
    if (200..300).contains(&status) {
        return DeleteAnswer::Deleted;
    }
    let unsupported = errors
        .iter()
        .any(|e| e.code.eq_ignore_ascii_case("UNSUPPORTED"));
    if status == 405 || unsupported {
        return DeleteAnswer::Unsupported(format!(
            "HTTP {status}{detail}: the registry does not allow deletes (distribution: \
             storage.delete.enabled is false)"
        ));
    }
    if status == 401 || status == 403 || errors.iter().any(says_denied) {
        return DeleteAnswer::Refused(format!(
            "HTTP {status}{detail}: the push secret's credentials may not delete here"
        ));
    }
    if status == 404 && errors.iter().any(says_not_found) {
        return DeleteAnswer::Missing(format!("HTTP 404{detail}: the registry does not have it"));
    }
    DeleteAnswer::Failed(format!(
        "HTTP {status}{detail}: the registry may or may not have deleted it"
    ))
}

#[cfg(test)]
mod tests;
