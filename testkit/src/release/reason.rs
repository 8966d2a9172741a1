//! What a failed rebase leaves in a node's `reason` annotation, which differs by z-stream: one
//! form per release row ([`super::Row::rebase_reason`]). Tests read a node's reason through it,
//! never decide by its text.

/// What a failed rebase leaves in the node's `reason` annotation (`SetDegraded` writes the
/// error `updateLayeredOS` returns, through `applyOSChanges` and `update`, unwrapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebaseReason {
    /// rpm-ostree's own error, `error running rpm-ostree rebase ...: manifest unknown`: what the
    /// report shows for its 4.20 cluster (a daemon without the retry wrapper).
    RpmOstree,
    /// `Failed to update OS to <image> after retries: timed out waiting for the condition`:
    /// `updateLayeredOS`'s retry wrapper (OCPBUGS-43406, on release-4.19 to 4.21 since
    /// 2025-07-22) drops rpm-ostree's error (only the daemon's log has it).
    AfterRetries,
    /// `failed to update OS to <image> after retries: <rpm-ostree's error>: timed out waiting
    /// for the condition`: the wrapper keeps the last error (OCPBUGS-109739, release-4.22 and
    /// main since 2026-08-17).
    AfterRetriesWithLastError,
}

impl RebaseReason {
    /// The reason a rebase to `image` that failed with rpm-ostree's `error` leaves.
    pub fn reason(self, image: &str, error: &str) -> String {
        const TIMED_OUT: &str = "timed out waiting for the condition";
        match self {
            Self::RpmOstree => error.to_owned(),
            Self::AfterRetries => {
                format!("Failed to update OS to {image} after retries: {TIMED_OUT}")
            }
            Self::AfterRetriesWithLastError => {
                format!("failed to update OS to {image} after retries: {error}: {TIMED_OUT}")
            }
        }
    }

    /// Whether the reason carries rpm-ostree's error (and so the registry's "manifest unknown").
    pub fn names_the_error(self) -> bool {
        self != Self::AfterRetries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "127.0.0.1:5000/ocb-image@sha256:aaaa";

    #[test]
    fn each_form_names_the_image_and_only_two_name_the_registry_error() {
        let error = format!(
            "error running rpm-ostree rebase --experimental ostree-unverified-registry:{IMAGE}: \
             error: reading manifest sha256:aaaa in x: manifest unknown"
        );
        for form in [
            RebaseReason::RpmOstree,
            RebaseReason::AfterRetries,
            RebaseReason::AfterRetriesWithLastError,
        ] {
            let reason = form.reason(IMAGE, &error);
            assert!(reason.contains(IMAGE), "{form:?}: {reason}");
            assert_eq!(
                reason.contains("manifest unknown"),
                form.names_the_error(),
                "{form:?}: {reason}"
            );
        }
        assert_eq!(
            RebaseReason::AfterRetries.reason(IMAGE, &error),
            format!(
                "Failed to update OS to {IMAGE} after retries: timed out waiting for the condition"
            )
        );
        assert!(
            RebaseReason::AfterRetriesWithLastError
                .reason(IMAGE, &error)
                .starts_with(&format!(
                    "failed to update OS to {IMAGE} after retries: error running rpm-ostree rebase"
                ))
        );
    }
}
