//! The builds MCO names or would reuse, as it finds them:
//!
//! - **the MachineOSConfig's current build**: named by the `current-machine-os-build`
//!   annotation (every release, from the moment a build starts) or `status.machineOSBuild`
//!   (4.21 on, once it succeeded); and any build whose image is a config's
//!   `status.currentImagePullSpec` (registry identity): on 4.19/4.20 the annotation names a new
//!   build while the config still points at the previous one's image, and from 4.20 a config
//!   change that needs no new image finds the build to reuse by that image
//!   (`GetMachineOSBuildForImagePullspec`, release-4.20 on: `reconcilePoolChange`);
//! - **the build for a pool's `spec.configuration`**: the node controller sends nodes to an
//!   image only while that build succeeded and is current (`canLayeredContinue`);
//! - **the build for its `status.configuration`**, the config its nodes run: a change rolled
//!   back reuses that config's build and image (`reuseExistingMachineOSBuildIfPossible`; a build
//!   whose image is gone is deleted and built again, which a prune must not cause).
//!
//! A pool's builds are its MachineOSConfig's (`spec.machineConfigPool`) for that rendered
//! config (`spec.machineConfig`). Where a pool or a build does not say its rendered config,
//! which build a rollout or a rollback would reuse cannot be told, and the config's builds are
//! kept.

use crate::core::image::{ImageKey, abbreviate};
use crate::core::model::{ANNOTATION_CURRENT_MOSB, MachineOSBuild};
use crate::core::snapshot::Snapshot;

use super::{Keep, Planned, Why};

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
        planned.keep(Why::new(
            Keep::CurrentBuild,
            format!(
                "MachineOSConfig {} names it its current build ({ANNOTATION_CURRENT_MOSB} or \
                 status.machineOSBuild)",
                config.name()
            ),
        ));
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
            planned.keep(Why::new(
                Keep::CurrentBuild,
                format!(
                    "its image {} is MachineOSConfig {}'s current image \
                     (status.currentImagePullSpec)",
                    abbreviate(current),
                    config.name()
                ),
            ));
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
        planned.keep(Why::new(
            Keep::PoolConfiguration,
            format!(
                "it names no rendered config (spec.machineConfig), so whether a rollout or a \
                 rollback of pool {} would reuse it cannot be told",
                pool.name()
            ),
        ));
        return;
    };
    for (field, target, what) in targets {
        match target {
            Some(target) if target == rendered => planned.keep(Why::new(
                Keep::PoolConfiguration,
                format!(
                    "it is the build for pool {}'s {field} {rendered}: {what}",
                    pool.name()
                ),
            )),
            Some(_) => {}
            None => planned.keep(Why::new(
                Keep::PoolConfiguration,
                format!(
                    "pool {} does not say its {field}, so which build a rollout or a rollback \
                     would reuse cannot be told",
                    pool.name()
                ),
            )),
        }
    }
}
