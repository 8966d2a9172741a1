//! The images plan counted per MachineOSConfig, for `serve`'s gauge
//! (`mosc_guard_deletable_images{machineosconfig}`): how many images (digests) `prune --apply
//! --images` would delete from the repositories of each config, or that a repository of it
//! could not be listed. The count is the plan's own [`ImagePlan::deletable`], so the gauge and
//! `prune` cannot disagree on the same inputs.
//!
//! A repository belongs to the configs pushing there now (`PushRepository::configs`); one that no
//! config pushes to any more (a push spec that changed) to the configs of the builds that tag
//! there; one that nothing names a config for, to `""` (as the deletable builds' gauge counts
//! builds naming none). A repository shared by several configs counts under each of them.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::image::repo_of;
use crate::core::snapshot::Snapshot;

use super::ImagePlan;

/// What the gauge says of one MachineOSConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigImages {
    /// Every repository of it was listed: the images `prune --apply --images` would delete.
    Deletable(usize),
    /// A repository of it could not be listed (the first such, and why): no count.
    NotListed { repository: String, why: String },
}

impl ConfigImages {
    pub fn count(&self) -> Option<usize> {
        match self {
            ConfigImages::Deletable(n) => Some(*n),
            ConfigImages::NotListed { .. } => None,
        }
    }
}

/// Every MachineOSConfig of `snapshot` (0 when none of its repositories holds a deletable
/// image), and any other owner a repository of `plan` has.
pub fn per_config(snapshot: &Snapshot, plan: &ImagePlan) -> BTreeMap<String, ConfigImages> {
    let mut counts: BTreeMap<String, ConfigImages> = snapshot
        .machine_os_configs
        .iter()
        .map(|c| (c.name().to_string(), ConfigImages::Deletable(0)))
        .collect();
    if let Some(why) = &plan.skipped {
        for count in counts.values_mut() {
            *count = ConfigImages::NotListed {
                repository: String::new(),
                why: why.clone(),
            };
        }
        return counts;
    }
    let deletable = plan.deletable();
    for repository in &plan.repositories {
        let source = &repository.source;
        let images = deletable
            .iter()
            .filter(|i| i.source.repository == source.repository)
            .count();
        for owner in owners(snapshot, &source.repository, &source.configs) {
            let count = counts.entry(owner).or_insert(ConfigImages::Deletable(0));
            match (&repository.not_listed, &*count) {
                (Some(why), ConfigImages::Deletable(_)) => {
                    *count = ConfigImages::NotListed {
                        repository: source.repository.clone(),
                        why: why.clone(),
                    };
                }
                (None, ConfigImages::Deletable(n)) => *count = ConfigImages::Deletable(n + images),
                (_, ConfigImages::NotListed { .. }) => {}
            }
        }
    }
    counts
}

/// The configs a repository counts under: those pushing there, else those of the builds that
/// tag there, else `""`.
fn owners(snapshot: &Snapshot, repository: &str, configs: &[String]) -> BTreeSet<String> {
    let mut owners: BTreeSet<String> = configs.iter().cloned().collect();
    if owners.is_empty() {
        owners = snapshot
            .machine_os_builds
            .iter()
            .filter(|b| {
                let repo = b.push_spec().and_then(repo_of);
                repo.is_some_and(|r| r.to_string() == repository)
            })
            .map(|b| b.config_name().unwrap_or_default().to_string())
            .collect();
    }
    if owners.is_empty() {
        owners.insert(String::new());
    }
    owners
}
