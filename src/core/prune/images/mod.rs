//! `prune`'s images: the tags in each MachineOSConfig's repository that no MachineOSBuild
//! names, each deletable or kept with every reason, from the snapshot and what the registry
//! listed (each tag resolved to a digest). Pure and table-tested (`../tests/images.rs`); the
//! listing and the deletes are `access::registry`'s, driven by `apply::images`; `serve`'s
//! registry audit counts the same plan per MachineOSConfig ([`per_config`]).
//!
//! A registry deletes a **digest**, with every tag on it, so a tag is deletable only when no
//! node, build or MachineOSConfig names its digest, in any spelling and any repository, and no
//! kept tag holds it; "could not tell" keeps, and so does OpenShift's internal registry (MCO
//! deletes ImageStreamTags there). The rules whole: docs/policy.md, "Images no build names".

mod named;
mod per_config;
mod relisted;
mod report;
mod repositories;
mod words;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::core::image::{RepoKey, abbreviate};
use crate::core::registry::Need;
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::{Listing, PushRepository, Resolved, TagAnswer};
use crate::core::snapshot::Snapshot;

use super::{Reason, add_reason, listed, nodes_do, reason_names};
pub use named::Named;
pub use per_config::{ConfigImages, per_config};
pub use relisted::{Relisted, relisted};
pub use report::{ImageReport, RepositoryReport};
pub use repositories::push_repositories;
pub use words::text;

/// Why a tag is kept: stable names (`--output json`'s `images[].reasons[]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TagKeep {
    /// A node runs or wants its digest.
    NodeNeedsImage,
    /// A MachineOSConfig names its digest (current image, an annotation).
    ConfigImage,
    /// It is a MachineOSConfig's push spec tag.
    ConfigTag,
    /// Another tag on its digest is kept or belongs to a build.
    SharesDigest,
    /// What it holds could not be told.
    DigestUnknown,
    /// Another tag of its repository could not be told.
    RepositoryUnclear,
    /// The registry no longer has it.
    Gone,
    /// OpenShift's internal registry: prune does not delete there.
    InternalRegistry,
    /// Which hosts are the internal registry could not be read, and this one may be.
    InternalRegistryUnknown,
}

/// One tag no build names, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTag {
    /// `host/path` of its repository.
    pub repository: String,
    pub tag: String,
    /// The digest it holds, when the registry told.
    pub digest: Option<String>,
    /// Sorted; empty: deletable.
    pub why: Vec<Reason<TagKeep>>,
}

impl PlannedTag {
    pub fn deletable(&self) -> bool {
        self.why.is_empty()
    }

    /// `host/path@digest`.
    pub fn image(&self) -> Option<String> {
        self.digest
            .as_ref()
            .map(|d| format!("{}@{d}", self.repository))
    }

    pub fn reasons(&self) -> Vec<TagKeep> {
        reason_names(&self.why)
    }

    fn keep(&mut self, keep: TagKeep, text: impl Into<String>) {
        add_reason(&mut self.why, keep, text.into());
    }
}

/// One repository, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryPlan {
    pub source: PushRepository,
    pub internal: Internal,
    /// Why its tags could not be listed (none: listed).
    pub not_listed: Option<String>,
    /// How many tags it has.
    pub tags: usize,
    /// How many of them belong to MachineOSBuilds (their tag, or a build's digest).
    pub build_tags: usize,
}

/// One digest `--apply --images` deletes, with the tags on it (all deletable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletableImage {
    /// Its repository, as planned (the push secret prune reaches it with among it).
    pub source: PushRepository,
    pub digest: String,
    pub tags: Vec<String>,
}

impl DeletableImage {
    /// `host/path@digest`.
    pub fn image(&self) -> String {
        format!("{}@{}", self.source.repository, self.digest)
    }
}

/// The images part of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImagePlan {
    /// Why no registry was asked at all (a dump without credentials, no ControllerConfig).
    pub skipped: Option<String>,
    pub repositories: Vec<RepositoryPlan>,
    /// Every tag no build names, by repository and tag.
    pub tags: Vec<PlannedTag>,
}

impl ImagePlan {
    /// A plan that asked no registry, and why.
    pub fn skipped(why: impl Into<String>) -> Self {
        ImagePlan {
            skipped: Some(why.into()),
            ..ImagePlan::default()
        }
    }

    /// The digests to delete, one per (repository, digest), in the plan's order.
    pub fn deletable(&self) -> Vec<DeletableImage> {
        let mut images: Vec<DeletableImage> = Vec::new();
        for t in self.tags.iter().filter(|t| t.deletable()) {
            let Some(digest) = &t.digest else { continue };
            let Some(repository) = self
                .repositories
                .iter()
                .find(|r| r.source.repository == t.repository)
            else {
                continue;
            };
            match images
                .iter_mut()
                .find(|i| i.source.repository == t.repository && &i.digest == digest)
            {
                Some(image) => image.tags.push(t.tag.clone()),
                None => images.push(DeletableImage {
                    source: repository.source.clone(),
                    digest: digest.clone(),
                    tags: vec![t.tag.clone()],
                }),
            }
        }
        images
    }

    /// Repositories whose tags could not be listed.
    pub fn not_listed(&self) -> impl Iterator<Item = &RepositoryPlan> {
        self.repositories.iter().filter(|r| r.not_listed.is_some())
    }

    pub fn tag(&self, repository: &str, tag: &str) -> Option<&PlannedTag> {
        self.tags
            .iter()
            .find(|t| t.repository == repository && t.tag == tag)
    }
}

/// The plan for the tags of `listings`, against what `snapshot` names.
pub fn plan_images(snapshot: &Snapshot, listings: &[Listing]) -> ImagePlan {
    let named = Named::of(snapshot);
    let mut plan = ImagePlan::default();
    for listing in listings {
        let (repository, tags) = plan_repository(listing, &named);
        plan.repositories.push(repository);
        plan.tags.extend(tags);
    }
    plan
}

fn plan_repository(listing: &Listing, named: &Named) -> (RepositoryPlan, Vec<PlannedTag>) {
    let source = &listing.source;
    let mut repository = RepositoryPlan {
        source: source.clone(),
        internal: listing.internal.clone(),
        not_listed: listing.tags.as_ref().err().cloned(),
        tags: listing.tags.as_ref().map_or(0, Vec::len),
        build_tags: 0,
    };
    let Ok(answers) = &listing.tags else {
        return (repository, Vec::new());
    };
    let key = RepoKey {
        registry: source.host.clone(),
        repository: source.path.clone(),
    };
    // Digests the builds' tags hold, with the build: deleting them deletes a build's image.
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    let mut unclear: Option<&TagAnswer> = None;
    let mut planned: Vec<PlannedTag> = Vec::new();
    for answer in answers {
        if let Resolved::Unknown(_) = answer.resolved {
            unclear.get_or_insert(answer);
        }
        let digest = match &answer.resolved {
            Resolved::Available(d) => Some(d.to_ascii_lowercase()),
            _ => None,
        };
        let by_tag = named.build_tags.get(&(key.clone(), answer.tag.clone()));
        let by_digest = digest.as_ref().and_then(|d| named.build_digests.get(d));
        if let Some(build) = by_tag.or(by_digest) {
            repository.build_tags += 1;
            if let Some(d) = &digest {
                held.entry(d.clone()).or_insert_with(|| build.clone());
            }
            continue;
        }
        let mut tag = PlannedTag {
            repository: source.repository.clone(),
            tag: answer.tag.clone(),
            digest: digest.clone(),
            why: Vec::new(),
        };
        match &answer.resolved {
            Resolved::Missing(why) => tag.keep(
                TagKeep::Gone,
                format!("the registry no longer has it ({why}): nothing to delete"),
            ),
            Resolved::Unknown(why) => tag.keep(
                TagKeep::DigestUnknown,
                format!("what it holds could not be told ({why}): kept until the registry says"),
            ),
            Resolved::Available(d) => needed(&mut tag, &d.to_ascii_lowercase(), &key, named),
        }
        match &listing.internal {
            Internal::Yes => tag.keep(
                TagKeep::InternalRegistry,
                format!(
                    "it is in OpenShift's internal registry, where MCO deletes the \
                     ImageStreamTag through the API, not the image through the registry; prune \
                     does not delete there: `oc delete imagestreamtag -n {}`",
                    istag(&source.path, &answer.tag)
                ),
            ),
            Internal::Unknown(why) => tag.keep(
                TagKeep::InternalRegistryUnknown,
                format!(
                    "which hosts are OpenShift's internal registry could not be read ({why}), and \
                     {} may be one (a Route with a host of its own), where MCO deletes through \
                     the API: kept until prune can read openshift-image-registry's Services and \
                     Routes",
                    source.host
                ),
            ),
            Internal::No => {}
        }
        planned.push(tag);
    }
    if let Some(first) = unclear {
        for tag in planned.iter_mut().filter(|t| t.tag != first.tag) {
            tag.keep(
                TagKeep::RepositoryUnclear,
                format!(
                    "what tag {} of its repository holds could not be told, and it may hold the \
                     same digest (a registry deletes a digest with every tag on it)",
                    first.tag
                ),
            );
        }
    }
    shares_digest(&mut planned, &held);
    (repository, planned)
}

/// `NS NAME:TAG` of the ImageStreamTag an internal-registry tag is (`<ns>/<name>`).
fn istag(path: &str, tag: &str) -> String {
    match path.split_once('/') {
        Some((ns, name)) => format!("{ns} {name}:{tag}"),
        None => format!("<namespace> {path}:{tag}"),
    }
}

/// The reasons that come from the digest and the tag: nodes, MachineOSConfigs.
fn needed(tag: &mut PlannedTag, digest: &str, repo: &RepoKey, named: &Named) {
    if let Some(nodes) = named.node_digests.get(digest) {
        for (how, verbs, what) in [
            (Need::Running, ("runs", "run"), "it (currentImage)"),
            (
                Need::Pending,
                ("is updating to", "are updating to"),
                "it (desiredImage, not reached yet)",
            ),
        ] {
            let names: Vec<&str> = nodes
                .iter()
                .filter(|(_, h)| **h == how)
                .map(|(n, _)| n.as_str())
                .collect();
            if !names.is_empty() {
                tag.keep(TagKeep::NodeNeedsImage, nodes_do(names, verbs, what));
            }
        }
    }
    if let Some(configs) = named.config_digests.get(digest) {
        tag.keep(
            TagKeep::ConfigImage,
            format!(
                "MachineOSConfig {} names its digest (status.currentImagePullSpec or an \
                 annotation such as a pre-built image)",
                listed(configs.iter().map(String::as_str))
            ),
        );
    }
    if let Some(configs) = named.config_tags.get(&(repo.clone(), tag.tag.clone())) {
        tag.keep(
            TagKeep::ConfigTag,
            format!(
                "it is MachineOSConfig {}'s push spec tag (spec.renderedImagePushSpec), where a \
                 pre-built image lives",
                listed(configs.iter().map(String::as_str))
            ),
        );
    }
}

/// A tag whose digest a build's tag or a kept tag also holds is kept: deleting the digest
/// deletes them too. Repeated until nothing changes (a tag kept this way keeps others).
fn shares_digest(tags: &mut [PlannedTag], held: &BTreeMap<String, String>) {
    loop {
        let kept: Vec<(String, String)> = tags
            .iter()
            .filter(|t| !t.deletable())
            .filter_map(|t| t.digest.clone().map(|d| (d, format!("tag {}", t.tag))))
            .collect();
        let mut changed = false;
        for tag in tags.iter_mut().filter(|t| t.deletable()) {
            let Some(digest) = tag.digest.clone() else {
                continue;
            };
            let holder = held
                .get(&digest)
                .map(|b| format!("the tag of MachineOSBuild {b}"))
                .or_else(|| {
                    kept.iter()
                        .find(|(d, _)| *d == digest)
                        .map(|(_, t)| format!("the kept {t}"))
                });
            if let Some(holder) = holder {
                tag.keep(
                    TagKeep::SharesDigest,
                    format!(
                        "{holder} holds the same digest {}: deleting it deletes that too",
                        abbreviate(&format!("{}@{digest}", tag.repository))
                    ),
                );
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}
