//! Whether a digest `prune --apply --images` planned to delete is still the same when its
//! repository is listed again right before the delete: still deletable, with exactly the tags
//! it was planned with; if not, every reason, in words. Table-tested (`../tests/recheck.rs`).

use crate::core::snapshot::Snapshot;

use super::{DeletableImage, Listing, Resolved, plan_images};

/// What the re-listing says of a planned digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relisted {
    /// Still deletable, with exactly the tags it was planned with: delete it.
    Same,
    /// No tag holds it any more: nothing to delete.
    Gone,
    /// The repository could not be listed again (why): not deleted.
    NotListed(String),
    /// Changed since the plan: the reasons (each tag kept now, held now or let go); empty when
    /// only the fresh plan as a whole tells.
    Changed(Vec<String>),
}

impl Relisted {
    pub fn why(&self) -> String {
        match self {
            Relisted::Same => "still deletable, with the tags it was planned with".to_string(),
            Relisted::Gone => "no tag holds it any more: nothing to delete".to_string(),
            Relisted::NotListed(why) => {
                format!("could not list its repository again ({why}): not deleted")
            }
            Relisted::Changed(reasons) if reasons.is_empty() => {
                "changed since the plan, so not deleted: the fresh plan differs".to_string()
            }
            Relisted::Changed(reasons) => format!(
                "changed since the plan, so not deleted: {}",
                reasons.join("; ")
            ),
        }
    }
}

/// `image` (as planned) against `listing`, its repository listed again, and `snapshot`, the
/// cluster read again: the fresh plan of that repository must still delete the digest with the
/// same tags.
pub fn relisted(image: &DeletableImage, snapshot: &Snapshot, listing: &Listing) -> Relisted {
    let tags = match &listing.tags {
        Ok(tags) => tags,
        Err(why) => return Relisted::NotListed(why.clone()),
    };
    let holders: Vec<&str> = tags
        .iter()
        .filter(
            |t| matches!(&t.resolved, Resolved::Available(d) if d.eq_ignore_ascii_case(&image.digest)),
        )
        .map(|t| t.tag.as_str())
        .collect();
    if holders.is_empty() {
        return Relisted::Gone;
    }
    let plan = plan_images(snapshot, std::slice::from_ref(listing));
    let still = plan
        .deletable()
        .into_iter()
        .find(|d| d.digest.eq_ignore_ascii_case(&image.digest));
    let sorted = |tags: &[String]| {
        let mut tags = tags.to_vec();
        tags.sort();
        tags
    };
    if still.is_some_and(|d| sorted(&d.tags) == sorted(&image.tags)) {
        return Relisted::Same;
    }
    let repository = &image.source.repository;
    let mut reasons: Vec<String> = Vec::new();
    for &tag in &holders {
        match plan.tag(repository, tag) {
            Some(t) if !t.deletable() => {
                reasons.extend(t.why.iter().map(|w| format!("tag {tag}: {}", w.text)))
            }
            Some(_) if !image.tags.iter().any(|t| t == tag) => {
                reasons.push(format!("tag {tag} holds it now too"))
            }
            None => reasons.push(format!("tag {tag} now belongs to a MachineOSBuild")),
            Some(_) => {}
        }
    }
    for tag in image.tags.iter().filter(|t| !holders.contains(&t.as_str())) {
        reasons.push(format!("tag {tag} no longer holds it"));
    }
    Relisted::Changed(reasons)
}
