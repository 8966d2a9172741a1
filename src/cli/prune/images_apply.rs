//! `prune --apply --images`: one deletable image (a digest and the tags on it) per turn, after
//! the builds. For each:
//!
//! 1. **re-read** the cluster (MachineOSBuilds, MachineOSConfigs, pools, nodes, the release)
//!    and **list its repository again** (every tag, each resolved), with the same push secret,
//!    and re-plan the repository from that: the digest must still be deletable and carry
//!    exactly the tags it was planned with. Gone (no tag holds it any more): `nothingToDo`.
//!    Anything else (a node, build or config names it now, another tag holds it, a tag moved,
//!    the repository could not be listed) stops the run: `changedSincePlan`;
//! 2. **delete** it: `DELETE /v2/<repository>/manifests/<digest>` with the push secret
//!    ([`crate::access::registry::delete`]). Refused credentials (`refused`) and a registry
//!    that does not allow deletes (`deletesUnsupported`) stop the run with nothing deleted; a
//!    request that failed on the way (`failed`) may or may not have been applied;
//! 3. **check** that the registry no longer serves the digest (`stillServed` stops the run).
//!
//! Nothing is retried or worked around.

use kube::Client;

use super::outcome::{Applied, Clock, Outcome, Step, set_step};
use crate::access::live;
use crate::access::registry::Registries;
use crate::access::registry::delete::ImageDeleter;
use crate::core::image::abbreviate;
use crate::core::prune::images::{DeletableImage, plan_images};
use crate::core::registry::deletion::Deletion;
use crate::core::registry::listing::Resolved;

/// One image's turn: re-read, re-list, re-plan, delete, check.
pub(super) struct ImageTurn<'a, 'b> {
    pub(super) client: &'a Client,
    pub(super) clock: &'a Clock,
    pub(super) registries: Option<&'a Registries>,
    pub(super) version: Option<&'a str>,
    pub(super) step: &'b mut Option<(usize, Step)>,
}

impl ImageTurn<'_, '_> {
    pub(super) async fn one(&mut self, image: &DeletableImage) -> Applied {
        let clock = self.clock;
        let a = Applied::image(image.image(), image.tags.clone());
        let source = &image.source;
        let Some(registries) = self.registries else {
            let why = "no registry session: nothing was deleted".to_string();
            return a.end(clock, Outcome::Failed, why);
        };
        clock.line(format!(
            "image {}: re-reading the cluster and listing {} again, then re-planning it",
            image.image(),
            source.repository
        ));
        let fresh = match live::snapshot(self.client).await {
            Ok((snapshot, _)) => snapshot.with_release_override(self.version),
            Err(e) => {
                let why = format!("could not re-read the cluster: {e}; nothing was deleted");
                return a.end(clock, Outcome::ReadFailed, why);
            }
        };
        let Some(session) = registries.session(source) else {
            let why = "its push secret could not be used: nothing was deleted".to_string();
            return a.end(clock, Outcome::Failed, why);
        };
        let listing = registries.listing(source).await;
        if let Err(why) = &listing.tags {
            let why = format!("could not list its repository again ({why}): not deleted");
            return a.end(clock, Outcome::Stopped("changedSincePlan"), why);
        }
        let holders: Vec<String> = listing
            .tags
            .iter()
            .flatten()
            .filter(|t| matches!(&t.resolved, Resolved::Digest(d) if d.eq_ignore_ascii_case(&image.digest)))
            .map(|t| t.tag.clone())
            .collect();
        if holders.is_empty() {
            let why = "no tag holds it any more: nothing to delete".to_string();
            return a.end(clock, Outcome::NothingToDo, why);
        }
        let plan = plan_images(&fresh, std::slice::from_ref(&listing));
        let still = plan
            .deletable()
            .into_iter()
            .find(|d| d.digest.eq_ignore_ascii_case(&image.digest));
        let mut planned_tags = image.tags.clone();
        planned_tags.sort();
        let same = still.as_ref().is_some_and(|d| {
            let mut tags = d.tags.clone();
            tags.sort();
            tags == planned_tags
        });
        if !same {
            let mut reasons: Vec<String> = Vec::new();
            for tag in &holders {
                match plan.tag(&source.repository, tag) {
                    Some(t) if !t.deletable() => {
                        reasons.extend(t.why.iter().map(|w| format!("tag {tag}: {}", w.text)))
                    }
                    Some(_) if !image.tags.contains(tag) => {
                        reasons.push(format!("tag {tag} holds it now too"))
                    }
                    None => reasons.push(format!("tag {tag} now belongs to a MachineOSBuild")),
                    Some(_) => {}
                }
            }
            for tag in image.tags.iter().filter(|t| !holders.contains(t)) {
                reasons.push(format!("tag {tag} no longer holds it"));
            }
            let why = format!(
                "changed since the plan, so not deleted: {}",
                if reasons.is_empty() {
                    "the fresh plan differs".to_string()
                } else {
                    reasons.join("; ")
                }
            );
            return a.end(clock, Outcome::Stopped("changedSincePlan"), why);
        }
        clock.line(format!(
            "image {}: still deletable (tags {}); deleting it from the registry with push secret {}",
            image.image(),
            image.tags.join(", "),
            source.secret.as_deref().unwrap_or("?"),
        ));
        set_step(self.step, Step::Deleting);
        let deleter = ImageDeleter::with_push_secret(std::sync::Arc::clone(&session));
        match deleter
            .delete(&source.host, &source.path, &image.digest)
            .await
        {
            Deletion::Deleted => {}
            Deletion::Gone(why) => {
                let why = format!("gone before its delete ({why}): nothing to delete");
                return a.end(clock, Outcome::NothingToDo, why);
            }
            Deletion::Unsupported(why) => {
                let why = format!(
                    "nothing was deleted: {why}; allow deletes there, or delete it with the \
                     registry's own tools"
                );
                return a.end(clock, Outcome::Stopped("deletesUnsupported"), why);
            }
            Deletion::Refused(why) => {
                let why = format!(
                    "the registry refused the delete, so nothing was deleted, and prune does not \
                     try another way: {why}"
                );
                return a.end(clock, Outcome::Stopped("refused"), why);
            }
            Deletion::Failed(why) => {
                let why = format!(
                    "the delete failed ({why}): the registry may or may not have applied it; run \
                     prune again, which lists every tag again"
                );
                return a.end(clock, Outcome::Failed, why);
            }
        }
        set_step(self.step, Step::Waiting);
        let reader = crate::access::registry::tags::TagReader::new(session);
        match reader
            .resolve(&source.host, &source.path, &image.digest)
            .await
        {
            Resolved::Gone(_) => {
                let why = format!(
                    "deleted from the registry, with its tags {}",
                    image.tags.join(", ")
                );
                a.end(clock, Outcome::Deleted, why)
            }
            Resolved::Digest(_) => {
                let why = format!(
                    "the registry accepted the delete but still serves {}",
                    abbreviate(&image.image())
                );
                a.end(clock, Outcome::Stopped("stillServed"), why)
            }
            Resolved::Unknown(why) => {
                let why = format!(
                    "deleted (the registry accepted it); whether it is gone could not be checked: \
                     {why}"
                );
                a.end(clock, Outcome::Deleted, why)
            }
        }
    }
}
