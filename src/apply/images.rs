//! `prune --apply --images`' turn: one deletable image (a digest and the tags on it), after the
//! builds. 1. **re-read** the cluster and **list its repository again** with the same push
//! secret; it must still be the same ([`crate::core::prune::images::relisted`]); 2. **delete**
//! the digest with the push secret (`refused`, `deletesUnsupported` stop the run with nothing
//! deleted; `failed` may or may not have been applied); 3. **check** that the registry no longer
//! serves it (`stillServed` stops the run). Nothing is retried or worked around.

use std::cell::Cell;
use std::sync::Arc;

use crate::access::registry::delete::ImageDeleter;
use crate::access::registry::session::Session;
use crate::access::registry::tags::TagReader;
use crate::core::image::abbreviate;
use crate::core::prune::images::{DeletableImage, Relisted, relisted};
use crate::core::registry::deletion::DeleteAnswer;
use crate::core::registry::listing::Resolved;

use super::Stage;
use super::outcome::Outcome;
use super::prune::PruneStep;

impl PruneStep<'_> {
    /// One image's turn: re-read, re-list, re-plan, delete, check; what it came to, and why
    /// (said on the clock by the caller).
    pub(super) async fn image(
        &self,
        image: &DeletableImage,
        stage: &Cell<Stage>,
    ) -> (Outcome, String) {
        let clock = self.clock;
        let source = &image.source;
        let Some(registries) = self.registries else {
            let why = "no registry session: nothing was deleted".to_string();
            return (Outcome::Failed, why);
        };
        clock.line(format!(
            "image {}: re-reading the cluster and listing {} again, then re-planning it",
            image.image(),
            source.repository
        ));
        let fresh = match self.reread().await {
            Ok(fresh) => fresh,
            Err(why) => return (Outcome::ReadFailed, why),
        };
        let Some(session) = registries.session(source) else {
            let why = "its push secret could not be used: nothing was deleted".to_string();
            return (Outcome::Failed, why);
        };
        let listing = registries.listing(source).await;
        match relisted(image, &fresh, &listing) {
            Relisted::Same => {}
            gone @ Relisted::Gone => return (Outcome::NothingToDo, gone.why()),
            changed => return (Outcome::Stopped("changedSincePlan"), changed.why()),
        }
        clock.line(format!(
            "image {}: still deletable (tags {}); deleting it from the registry with push secret {}",
            image.image(),
            image.tags.join(", "),
            source.secret.as_deref().unwrap_or("?"),
        ));
        stage.set(Stage::Writing);
        let deleter = ImageDeleter::with_push_secret(Arc::clone(&session));
        match deleter
            .delete(&source.host, &source.path, &image.digest)
            .await
        {
            DeleteAnswer::Deleted => {
                stage.set(Stage::Waiting);
                self.check_gone(image, session).await
            }
            DeleteAnswer::Missing(why) => (
                Outcome::NothingToDo,
                format!("gone before its delete ({why}): nothing to delete"),
            ),
            DeleteAnswer::Unsupported(why) => (
                Outcome::Stopped("deletesUnsupported"),
                format!(
                    "nothing was deleted: {why}; allow deletes there, or delete it with the \
                     registry's own tools"
                ),
            ),
            DeleteAnswer::Refused(why) => (
                Outcome::Stopped("refused"),
                format!(
                    "the registry refused the delete, so nothing was deleted, and prune does not \
                     try another way: {why}"
                ),
            ),
            DeleteAnswer::Failed(why) => (
                Outcome::Failed,
                format!(
                    "the delete failed ({why}): the registry may or may not have applied it; run \
                     prune again, which lists every tag again"
                ),
            ),
        }
    }

    /// Whether the registry still serves the digest after its delete was accepted.
    async fn check_gone(&self, image: &DeletableImage, session: Arc<Session>) -> (Outcome, String) {
        let source = &image.source;
        let reader = TagReader::new(session);
        match reader
            .resolve(&source.host, &source.path, &image.digest)
            .await
        {
            Resolved::Missing(_) => (
                Outcome::Deleted,
                format!(
                    "deleted from the registry, with its tags {}",
                    image.tags.join(", ")
                ),
            ),
            Resolved::Available(_) => (
                Outcome::Stopped("stillServed"),
                format!(
                    "the registry accepted the delete but still serves {}",
                    abbreviate(&image.image())
                ),
            ),
            Resolved::Unknown(why) => (
                Outcome::Deleted,
                format!(
                    "deleted (the registry accepted it); whether it is gone could not be \
                     checked: {why}"
                ),
            ),
        }
    }
}
