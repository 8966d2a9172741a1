//! The images part of `prune --output json` (docs/cli.md, "prune"): `images[]`, every tag no
//! MachineOSBuild names, and `imageRepositories[]`, each repository and whether it was listed.

use serde::Serialize;

use super::{ImagePlan, Internal, PlannedTag, RepositoryPlan, TagKeep};

/// One tag no build names.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageReport<'a> {
    /// `host/path`.
    pub repository: &'a str,
    pub tag: &'a str,
    /// `sha256:...`, when the registry told.
    pub digest: Option<&'a str>,
    /// `host/path@digest`.
    pub image: Option<String>,
    pub deletable: bool,
    /// Every reason it is kept, in words (empty: deletable).
    pub why: Vec<&'a str>,
    /// The reasons' stable names.
    pub reasons: Vec<TagKeep>,
}

/// One repository.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryReport<'a> {
    pub repository: &'a str,
    #[serde(rename = "machineOSConfigs")]
    pub machine_os_configs: &'a [String],
    /// The push secret's name (never its content).
    pub push_secret: Option<&'a str>,
    pub internal_registry: bool,
    pub listed: bool,
    /// Why it was not listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<&'a str>,
    pub tags: usize,
    /// Tags that belong to MachineOSBuilds (their tag, or a build's image): not in `images[]`.
    pub build_tags: usize,
}

impl<'a> ImageReport<'a> {
    pub fn of(t: &'a PlannedTag) -> Self {
        ImageReport {
            repository: &t.repository,
            tag: &t.tag,
            digest: t.digest.as_deref(),
            image: t.image(),
            deletable: t.deletable(),
            why: t.why.iter().map(|w| w.text.as_str()).collect(),
            reasons: t.reasons(),
        }
    }
}

impl<'a> RepositoryReport<'a> {
    pub fn of(r: &'a RepositoryPlan) -> Self {
        RepositoryReport {
            repository: &r.source.repository,
            machine_os_configs: &r.source.configs,
            push_secret: r.source.secret.as_deref(),
            internal_registry: r.internal == Internal::Yes,
            listed: r.not_listed.is_none(),
            why: r.not_listed.as_deref(),
            tags: r.tags,
            build_tags: r.build_tags,
        }
    }
}

impl ImagePlan {
    pub fn report(&self) -> (Vec<ImageReport<'_>>, Vec<RepositoryReport<'_>>) {
        (
            self.tags.iter().map(ImageReport::of).collect(),
            self.repositories.iter().map(RepositoryReport::of).collect(),
        )
    }
}
