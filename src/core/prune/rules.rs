//! What the build is and what is happening to it and its MachineOSConfig (docs/policy.md, rule
//! 12): too young (or of unknown age), still building (MCO's to finish or supersede), already
//! being deleted, its config being deleted or rebuilt (prune again once done), no
//! `machine-os-config` label (MCO would delete the build but not its image), or a tag not its
//! own `<repo>:<name>` (a pre-built image's synthetic build tags the config's push spec, so
//! deleting it deletes whatever that tag points to now, which no object shows).

use std::time::Duration;

use crate::core::image::ImageKey;
use crate::core::model::{ANNOTATION_REBUILD, LABEL_MACHINE_OS_CONFIG, MachineOSBuild};
use crate::core::snapshot::Snapshot;

use super::{Keep, Options, Planned, State};

pub(super) fn add(
    planned: &mut Planned,
    build: &MachineOSBuild,
    snapshot: &Snapshot,
    options: &Options,
) {
    age(planned, options.keep_younger_than);
    if planned.state == State::Building {
        planned.keep(
            Keep::Building,
            "it has not finished (no Succeeded, Failed or Interrupted condition): MCO is still \
             building it, or supersedes it when another build starts",
        );
    }
    if build.being_deleted() {
        planned.keep(
            Keep::BeingDeleted,
            "it is already being deleted (deletionTimestamp set)",
        );
    }
    if let Some(config) = build
        .config_name()
        .and_then(|c| snapshot.machine_os_config(c))
    {
        if config.being_deleted() {
            planned.keep(
                Keep::ConfigBeingDeleted,
                format!(
                    "its MachineOSConfig {} is being deleted: MCO and the garbage collector delete \
                     its builds once it is gone",
                    config.name()
                ),
            );
        }
        if config.rebuild_requested() {
            planned.keep(
                Keep::RebuildPending,
                format!(
                    "its MachineOSConfig {} carries {ANNOTATION_REBUILD}: MCO is about to delete \
                     its current build and build it again; prune again once the new build is done",
                    config.name()
                ),
            );
        }
    }
    if build.config_label().is_none() {
        planned.keep(
            Keep::NoConfigLabel,
            format!(
                "it has no {LABEL_MACHINE_OS_CONFIG} label: MCO would delete the build but not its \
                 image, which would stay in the registry with nothing naming it"
            ),
        );
    }
    tag(planned, build);
}

fn age(planned: &mut Planned, keep_younger_than: Duration) {
    let Some(age) = planned.age else {
        planned.keep(
            Keep::AgeUnknown,
            "it has no creationTimestamp, so its age cannot be told",
        );
        return;
    };
    // A clock behind the API server's makes a new build look unborn: younger than anything.
    let young = u64::try_from(age.as_secs()).map_or(true, |s| s < keep_younger_than.as_secs());
    if young {
        planned.keep(
            Keep::Young,
            format!(
                "it was created {} ago, less than --keep-younger-than {}",
                super::words::age(age),
                super::words::duration(keep_younger_than)
            ),
        );
    }
}

fn tag(planned: &mut Planned, build: &MachineOSBuild) {
    let own = build
        .push_spec()
        .map(ImageKey::parse)
        .is_some_and(|key| key.tag() == Some(build.name()));
    if own {
        return;
    }
    let text = match (build.push_spec(), build.is_pre_built()) {
        (Some(tag), true) => format!(
            "it is the synthetic build of a pre-built image: its tag is its MachineOSConfig's push \
             spec {tag}, so deleting it makes MCO delete whatever that tag points to now, which \
             the objects do not show"
        ),
        (Some(tag), false) => format!(
            "its tag {tag} is not its own name: deleting it makes MCO delete whatever that tag \
             points to now, which the objects do not show"
        ),
        (None, _) => "it names no tag (spec.renderedImagePushSpec), so what MCO would delete \
                      cannot be told"
            .to_string(),
    };
    planned.keep(Keep::TagNotItsOwn, text);
}
