//! The builds MCO names or would reuse (docs/policy.md, rule 12): a MachineOSConfig's current
//! build (by annotation, `status.machineOSBuild`, or a build carrying its
//! `currentImagePullSpec`), and the builds for a pool's `spec.configuration` (the rollout,
//! `canLayeredContinue`) and `status.configuration` (what a rollback reuses). A pool's builds are
//! its config's for that rendered config; where a pool or build does not say its rendered config,
//! the config's builds are kept.

use crate::core::image::{ImageKey, abbreviate};
use crate::core::model::{ANNOTATION_CURRENT_MOSB, MachineOSBuild};
use crate::core::snapshot::Snapshot;

use super::{Keep, Planned};

pub(super) fn add(planned: &mut Planned, build: &MachineOSBuild, snapshot: &Snapshot) {
    current(planned, build, snapshot);
    pool_configurations(planned, build, snapshot);
}

fn current(planned: &mut Planned, build: &MachineOSBuild, snapshot: &Snapshot) {
    if let Some(config) = build
        .config_name()
        .and_then(|c| snapshot.machine_os_config(c))
        .filter(|c| c.names_as_current(build.name()))
    {
        planned.keep(
            Keep::CurrentBuild,
            format!(
                "MachineOSConfig {} names it its current build ({ANNOTATION_CURRENT_MOSB} or \
                 status.machineOSBuild)",
                config.name()
            ),
        );
    }
    let images: Vec<ImageKey> = planned
        .image
        .iter()
        .chain(&planned.deletes)
        .map(|i| ImageKey::parse(i))
        .collect();
    for config in &snapshot.machine_os_configs {
        let Some(current) = config.current_image() else {
            continue;
        };
        if images.contains(&ImageKey::parse(current)) {
            planned.keep(
                Keep::CurrentBuild,
                format!(
                    "its image {} is MachineOSConfig {}'s current image \
                     (status.currentImagePullSpec)",
                    abbreviate(current),
                    config.name()
                ),
            );
        }
    }
}

fn pool_configurations(planned: &mut Planned, build: &MachineOSBuild, snapshot: &Snapshot) {
    let Some(config) = build
        .config_name()
        .and_then(|c| snapshot.machine_os_config(c))
    else {
        return;
    };
    let Some(pool) = snapshot
        .pools
        .iter()
        .find(|p| p.name() == config.pool_name())
    else {
        return;
    };
    let targets = [
        (
            "spec.configuration",
            pool.rendered_config(),
            "MCO rolls the pool out to its image from it",
        ),
        (
            "status.configuration",
            pool.status
                .configuration
                .as_ref()
                .map(|r| r.name.as_str())
                .filter(|n| !n.is_empty()),
            "the config the pool's nodes run: a rollback reuses this build and its image",
        ),
    ];
    let Some(rendered) = build.rendered_config() else {
        planned.keep(
            Keep::PoolConfiguration,
            format!(
                "it names no rendered config (spec.machineConfig), so whether a rollout or a \
                 rollback of pool {} would reuse it cannot be told",
                pool.name()
            ),
        );
        return;
    };
    for (field, target, what) in targets {
        match target {
            Some(target) if target == rendered => planned.keep(
                Keep::PoolConfiguration,
                format!(
                    "it is the build for pool {}'s {field} {rendered}: {what}",
                    pool.name()
                ),
            ),
            Some(_) => {}
            None => planned.keep(
                Keep::PoolConfiguration,
                format!(
                    "pool {} does not say its {field}, so which build a rollout or a rollback \
                     would reuse cannot be told",
                    pool.name()
                ),
            ),
        }
    }
}
