//! `prune --output json`: the plan as a stable schema (docs/cli.md, "prune"). Every
//! MachineOSBuild is in exactly one of `deletable` and `kept`; `images` lists the tags no build
//! names, each deletable or kept ([`super::images`]), `imageRepositories` the repositories they
//! were listed from.

use serde::Serialize;

use crate::core::report::ReleaseReport;

use super::images::{ImagePlan, ImageReport, RepositoryReport};
use super::{Keep, Plan, Planned, State};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    pub deletable: Vec<About<'a>>,
    pub kept: Vec<Kept<'a>>,
    /// The tags no MachineOSBuild names, each deletable or kept.
    pub images: Vec<ImageReport<'a>>,
    /// The repositories listed (or not, and why).
    pub image_repositories: Vec<RepositoryReport<'a>>,
    /// `--keep`.
    pub keep: usize,
    /// `--keep-younger-than`, in seconds.
    pub keep_younger_than_seconds: u64,
    pub release: ReleaseReport<'a>,
    /// Notes about the source (skipped files of a dump, APIs not served, the cautious rules).
    pub warnings: Vec<String>,
}

/// A deletable build, and what a kept one says besides its reasons.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct About<'a> {
    pub build: &'a str,
    #[serde(rename = "machineOSConfig")]
    pub machine_os_config: Option<&'a str>,
    pub pool: Option<&'a str>,
    pub state: State,
    /// `metadata.creationTimestamp` (RFC 3339).
    pub created: Option<String>,
    pub age_seconds: Option<i64>,
    /// `status.digestedImagePushSpec`.
    pub image: Option<&'a str>,
    /// `spec.renderedImagePushSpec`: the tag MCO deletes the image by.
    pub tag: Option<&'a str>,
    /// The images deleting it makes MCO delete from the registry (empty: none).
    pub deletes: &'a [String],
}

#[derive(Debug, Serialize)]
pub struct Kept<'a> {
    #[serde(flatten)]
    pub about: About<'a>,
    /// Every reason, in words.
    pub why: Vec<&'a str>,
    /// The reasons' stable names.
    pub reasons: Vec<Keep>,
}

impl<'a> Report<'a> {
    pub fn new(plan: &'a Plan, images: &'a ImagePlan, mut warnings: Vec<String>) -> Self {
        warnings.extend(plan.rules.note());
        if let Some(why) = &images.skipped {
            warnings.push(format!(
                "images no MachineOSBuild names were not listed: {why}"
            ));
        }
        let (images, image_repositories) = images.report();
        Report {
            deletable: plan.deletable().map(about).collect(),
            kept: plan
                .kept()
                .map(|b| Kept {
                    about: about(b),
                    why: b.why.iter().map(|w| w.text.as_str()).collect(),
                    reasons: b.reasons(),
                })
                .collect(),
            images,
            image_repositories,
            keep: plan.options.keep,
            keep_younger_than_seconds: plan.options.keep_younger_than.as_secs(),
            release: ReleaseReport::of(&plan.rules),
            warnings,
        }
    }
}

fn about(b: &Planned) -> About<'_> {
    About {
        build: &b.name,
        machine_os_config: b.config.as_deref(),
        pool: b.pool.as_deref(),
        state: b.state,
        created: b.created.map(|c| c.to_string()),
        age_seconds: b.age.map(|a| a.as_secs()),
        image: b.image.as_deref(),
        tag: b.tag.as_deref(),
        deletes: &b.deletes,
    }
}
