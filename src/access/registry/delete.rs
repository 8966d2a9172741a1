//! The one write `mosc-guard prune` makes to a registry: `DELETE /v2/<repository>/manifests/
//! <digest>`, as MCO's image pruner makes it (containers/image's `deleteImage`: by digest, with
//! the push secret, a token scoped `repository:<name>:*`). The registry deletes the manifest
//! with every tag on it. [`ImageDeleter`] is its own type with an explicit constructor: the
//! [`Checker`](super::Checker) and the [`TagReader`](super::tags::TagReader) never write. What
//! the answer means is [`crate::core::registry::deletion`]'s; its words are redacted.

use std::sync::Arc;

use reqwest::Method;

use super::session::{ACCEPT_MANIFESTS, Actions, Request, Session};
use crate::core::registry::deletion::{DeleteAnswer, judge_delete};

/// Deletes manifests by digest, with the push secret MCO deletes with.
pub struct ImageDeleter {
    session: Arc<Session>,
}

impl ImageDeleter {
    /// The write path: deletes with `session`'s credentials. Nothing else in this crate sends a
    /// `DELETE` to a registry.
    pub fn with_push_secret(session: Arc<Session>) -> Self {
        ImageDeleter { session }
    }

    /// Deletes `digest` (`sha256:...`) from `repository` on `host`.
    pub async fn delete(&self, host: &str, repository: &str, digest: &str) -> DeleteAnswer {
        let path = format!("/v2/{repository}/manifests/{digest}");
        let request = Request {
            method: Method::DELETE,
            host,
            repository,
            path: &path,
            accept: ACCEPT_MANIFESTS,
            actions: Actions::All,
        };
        let reply = match self.session.send(&request).await {
            Ok(resp) => {
                self.session
                    .read(resp, self.session.limits().small_bytes)
                    .await
                    .0
            }
            Err(reply) => reply,
        };
        match judge_delete(&reply) {
            DeleteAnswer::Deleted => DeleteAnswer::Deleted,
            DeleteAnswer::Missing(w) => DeleteAnswer::Missing(self.session.clean(&w)),
            DeleteAnswer::Unsupported(w) => DeleteAnswer::Unsupported(self.session.clean(&w)),
            DeleteAnswer::Refused(w) => DeleteAnswer::Refused(self.session.clean(&w)),
            DeleteAnswer::Failed(w) => DeleteAnswer::Failed(self.session.clean(&w)),
        }
    }
}
