//! `prune`'s pure plan: for every MachineOSBuild, whether deleting it now is safe and frees
//! something, or every reason it is kept, from a snapshot, the options and the time. MCO deletes
//! only builds that did not succeed, so succeeded builds stay for the life of the cluster unless
//! pruned. The rules, one file per family ([`needs`], [`reuse`], [`revisions`], [`rules`],
//! [`shared`]), are docs/policy.md's rule 12; where the objects cannot tell, the build is kept and
//! the reason says what is missing. Table-tested (`tests/`); front ends: `cli::prune` and serve's
//! gauge (`decision::gauges`). Tags no build names are planned apart: [`images`].

pub mod images;
mod needs;
mod recheck;
mod report;
mod reuse;
mod revisions;
mod rules;
mod shared;
pub mod words;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::core::model::MachineOSBuild;
use crate::core::policy::{self, Deletion, PolicyMode, Verdict};
use crate::core::release::Rules;
use crate::core::snapshot::Snapshot;

pub use recheck::{Recheck, recheck};
pub use report::{About, Kept, Report};

/// `--keep` and `--keep-younger-than`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The newest succeeded builds of each MachineOSConfig always kept (`oc adm prune images`'
    /// `--keep-tag-revisions` keeps 3 too).
    pub keep: usize,
    /// Builds younger than this are kept whatever else holds.
    pub keep_younger_than: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            keep: 3,
            keep_younger_than: Duration::from_secs(60 * 60),
        }
    }
}

/// Where a build is, from its conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum State {
    Succeeded,
    Failed,
    Interrupted,
    /// Neither succeeded nor ended: pending or running.
    Building,
}

impl State {
    fn of(build: &MachineOSBuild) -> State {
        if build.succeeded() {
            State::Succeeded
        } else if build.interrupted() {
            State::Interrupted
        } else if build.failed() {
            State::Failed
        } else {
            State::Building
        }
    }
}

/// Why a build is kept: stable names (`--output json`'s `reasons[]`), in the order the text
/// lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Keep {
    /// A node runs or wants its image (the policy's node rule, in-use).
    NodeNeedsImage,
    /// A pool is rolling its image out (the policy's pool rule).
    PoolRollingOut,
    /// A joining machine would pull its image at first boot (the policy, 4.21 on).
    JoiningMachine,
    /// Its MachineOSConfig names it as current, or its image is a config's current image.
    CurrentBuild,
    /// It is the build for a pool's `spec.configuration` or `status.configuration` (or the
    /// objects do not say which that is).
    PoolConfiguration,
    /// One of the newest `keep` succeeded builds of its MachineOSConfig.
    Newest,
    /// Younger than `keep_younger_than`.
    Young,
    /// No `creationTimestamp`: its age cannot be told.
    AgeUnknown,
    /// Not finished: MCO is still building it, or about to.
    Building,
    /// Already being deleted.
    BeingDeleted,
    /// Its MachineOSConfig is being deleted: MCO and the garbage collector delete its builds.
    ConfigBeingDeleted,
    /// Its MachineOSConfig carries the rebuild annotation: MCO is about to rebuild.
    RebuildPending,
    /// No `machine-os-config` label: MCO would delete the build but not its image.
    NoConfigLabel,
    /// Its tag is not `<repo>:<its name>`: what deleting it deletes cannot be told.
    TagNotItsOwn,
    /// Deleting it deletes an image a kept build carries.
    SharesImage,
    /// No image of its own, but its tag may hold an earlier same-name build's image in use.
    EarlierImageUnderTag,
}

/// One reason a build (`K`: [`Keep`]) or a tag ([`images::TagKeep`]) is kept, in words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reason<K> {
    pub keep: K,
    pub text: String,
}

/// Adds a reason to `why` unless it is there already, keeping `why` sorted.
fn add_reason<K: Ord>(why: &mut Vec<Reason<K>>, keep: K, text: String) {
    let reason = Reason { keep, text };
    if !why.contains(&reason) {
        why.push(reason);
        why.sort();
    }
}

/// The reasons' stable names, each once.
fn reason_names<K: Ord + Copy>(why: &[Reason<K>]) -> Vec<K> {
    let set: BTreeSet<K> = why.iter().map(|w| w.keep).collect();
    set.into_iter().collect()
}

/// One MachineOSBuild, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    /// `metadata.uid` and `metadata.resourceVersion` as read: `--apply` deletes only this.
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Its MachineOSConfig (label, else spec) and its pool (label).
    pub config: Option<String>,
    pub pool: Option<String>,
    pub state: State,
    pub created: Option<Timestamp>,
    /// `now - created`, when known.
    pub age: Option<SignedDuration>,
    /// `status.digestedImagePushSpec`.
    pub image: Option<String>,
    /// `spec.renderedImagePushSpec`: the tag MCO deletes the image by.
    pub tag: Option<String>,
    /// The images deleting it makes MCO delete, as the guard's policy sees them.
    pub deletes: Vec<String>,
    /// Why it is kept, sorted by reason; empty: it is deletable.
    pub why: Vec<Reason<Keep>>,
}

impl Planned {
    pub fn deletable(&self) -> bool {
        self.why.is_empty()
    }

    /// Oldest first, one without a `creationTimestamp` after every dated one.
    fn age_order(&self) -> (bool, Option<Timestamp>) {
        (self.created.is_none(), self.created)
    }

    /// The reasons' stable names, each once.
    pub fn reasons(&self) -> Vec<Keep> {
        reason_names(&self.why)
    }

    fn keep(&mut self, keep: Keep, text: impl Into<String>) {
        add_reason(&mut self.why, keep, text.into());
    }
}

/// Every MachineOSBuild, planned: by MachineOSConfig, oldest first (the order `--apply`
/// deletes in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub builds: Vec<Planned>,
    pub options: Options,
    /// The release rules the policy decided with.
    pub rules: Rules,
}

impl Plan {
    pub fn deletable(&self) -> impl Iterator<Item = &Planned> {
        self.builds.iter().filter(|b| b.deletable())
    }

    pub fn kept(&self) -> impl Iterator<Item = &Planned> {
        self.builds.iter().filter(|b| !b.deletable())
    }

    pub fn build(&self, name: &str) -> Option<&Planned> {
        self.builds.iter().find(|b| b.name == name)
    }
}

/// The plan for `snapshot` (every node in it) at `now`, each build's deletion decided by the
/// guard's policy in `in-use` mode.
pub fn plan(snapshot: &Snapshot, options: &Options, now: Timestamp) -> Plan {
    plan_with(snapshot, options, now, |build| {
        policy::evaluate(snapshot, Deletion::MachineOSBuild(build), PolicyMode::InUse)
    })
}

/// Whether a plan of `snapshot` reads its nodes besides the verdicts: only for a build without
/// an image of its own (the rule of [`shared`] that looks for an earlier build's image under
/// its tag). Otherwise [`plan_with`] needs no node in `snapshot.nodes`, and a caller holding
/// tens of thousands (`serve`'s gauge, on every scrape) need not gather them.
pub fn reads_every_node(snapshot: &Snapshot) -> bool {
    snapshot
        .machine_os_builds
        .iter()
        .any(|b| b.digested_image().is_none())
}

/// [`plan`] with each build's verdict from `verdict_of`, which must be the policy's in `in-use`
/// mode (`serve`'s gauge passes the indexed decision, which equals it). `snapshot.nodes` must
/// hold every node when [`reads_every_node`] says so.
pub fn plan_with(
    snapshot: &Snapshot,
    options: &Options,
    now: Timestamp,
    mut verdict_of: impl FnMut(&MachineOSBuild) -> Verdict,
) -> Plan {
    let mut builds: Vec<Planned> = snapshot
        .machine_os_builds
        .iter()
        .map(|build| {
            let verdict = verdict_of(build);
            let mut planned = planned(build, &verdict, now);
            needs::add(&mut planned, &verdict);
            rules::add(&mut planned, build, snapshot, options);
            reuse::add(&mut planned, build, snapshot);
            planned
        })
        .collect();
    revisions::add(&mut builds, options);
    shared::add(&mut builds, snapshot);
    builds.sort_by(|a, b| {
        (&a.config, a.age_order(), &a.name).cmp(&(&b.config, b.age_order(), &b.name))
    });
    Plan {
        builds,
        options: *options,
        rules: snapshot.rules(),
    }
}

fn planned(build: &MachineOSBuild, verdict: &Verdict, now: Timestamp) -> Planned {
    let created = build.metadata.creation_timestamp.as_ref().map(|t| t.0);
    Planned {
        name: build.name().to_string(),
        uid: build.metadata.uid.clone(),
        resource_version: build.metadata.resource_version.clone(),
        config: build.config_name().map(str::to_string),
        pool: build.pool_label().map(str::to_string),
        state: State::of(build),
        created,
        age: created.map(|c| now.duration_since(c)),
        image: build.digested_image().map(str::to_string),
        tag: build.push_spec().map(str::to_string),
        deletes: verdict.images.iter().map(|i| i.image.clone()).collect(),
        why: Vec::new(),
    }
}

/// Where copies of an object in a dump disagree, the plans of every combination: a build is
/// deletable only if every plan says so, and kept for every reason any gives.
pub fn most_cautious(plans: Vec<Plan>) -> Option<Plan> {
    let mut plans = plans.into_iter();
    let mut merged = plans.next()?;
    for other in plans {
        for b in other.builds {
            match merged.builds.iter_mut().find(|m| m.name == b.name) {
                Some(m) => {
                    for why in b.why {
                        m.keep(why.keep, why.text);
                    }
                }
                None => merged.builds.push(b),
            }
        }
    }
    Some(merged)
}

/// `n` names, the first five of them listed (`a, b, c and 2 more`).
fn listed<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 5;
    let names: Vec<&str> = names.into_iter().collect();
    let shown = names[..names.len().min(SHOWN)].join(", ");
    match names.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// `2 nodes run it: a, b` (`verbs`: for one node, for more).
fn nodes_do(names: Vec<&str>, verbs: (&str, &str), what: &str) -> String {
    let (n, verb) = match names.len() {
        1 => ("1 node".to_string(), verbs.0),
        n => (format!("{n} nodes"), verbs.1),
    };
    format!("{n} {verb} {what}: {}", listed(names))
}

#[cfg(test)]
mod tests;
