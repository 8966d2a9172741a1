//! What MCO's node controller sends a pool's nodes now (`canLayeredContinue`,
//! `SetDesiredStateFromPool` and their callers in `pkg/controller/node/`, the same on release-4.19
//! to 4.23). One reading of MCO, shared by the pool rule (is the gap between two nodes safe) and
//! recovery (is a new target MCO moving on; does a config send the pool an image; has the rollout
//! resumed).

use std::sync::Arc;

use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};

/// Where the build for a pool's `spec.configuration` stands (`getConfigAndBuild`'s `mosb` and
/// its `MachineOSBuildState`), as far as the node controller cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolBuild {
    /// No build of the config for the pool's `spec.configuration` ("waiting for a new OS image
    /// build to start").
    Missing,
    /// Pending or running: no terminal condition yet.
    Running(String),
    /// Succeeded; `current` when its digested image is the config's `currentImagePullSpec` as an
    /// exact string (`MachineOSBuildIsCurrent`).
    Succeeded { build: String, current: bool },
    /// Failed or Interrupted.
    Failed(String),
}

/// What the node controller writes to a candidate node of a pool now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolTarget<'s> {
    /// `spec.paused`: it sends nothing.
    Paused,
    /// A MachineOSConfig targets the pool and `canLayeredContinue` is false: it sends nothing
    /// until the build for the pool's configuration succeeds with the config's image.
    Waiting { config: &'s str, build: PoolBuild },
    /// It sends candidates `desiredConfig = config` and `desiredImage = image` (`None`: the
    /// annotation removed, the pool is not layered).
    Sends {
        config: &'s str,
        image: Option<&'s str>,
    },
    /// The pool's `spec.configuration` is not known (a trimmed dump): cannot tell.
    Unknown,
}

/// The MachineOSConfig that targets `pool` (`getConfigAndBuild`: the first whose
/// `spec.machineConfigPool.name` is the pool).
pub fn config_of<'s>(
    pool: &str,
    configs: &'s [Arc<MachineOSConfig>],
) -> Option<&'s MachineOSConfig> {
    configs
        .iter()
        .map(Arc::as_ref)
        .find(|m| m.pool_name() == pool)
}

/// The build of `config` for `pool`'s `spec.configuration`, as `getConfigAndBuild` finds it:
/// `None` when the pool's configuration is not known. MCO takes the first its cache lists; with
/// several for one configuration (a Containerfile changed, a failed build and its fix), the
/// one that lets the rollout go on counts, then a running one, then a failed one: the
/// cautious reading for the pool rule, and what a later pass of MCO finds.
pub fn pool_build(
    pool: &MachineConfigPool,
    config: &MachineOSConfig,
    builds: &[Arc<MachineOSBuild>],
) -> Option<PoolBuild> {
    let rendered = pool.rendered_config()?;
    let current = config.current_image();
    let mut found = PoolBuild::Missing;
    for b in builds
        .iter()
        .filter(|b| b.config_by_spec() == Some(config.name()))
        .filter(|b| b.rendered_config() == Some(rendered))
    {
        let state = if b.succeeded() {
            PoolBuild::Succeeded {
                build: b.name().to_string(),
                current: current.is_some() && b.digested_image() == current,
            }
        } else if b.failed() {
            PoolBuild::Failed(b.name().to_string())
        } else {
            PoolBuild::Running(b.name().to_string())
        };
        if rank(&state) > rank(&found) {
            found = state;
        }
    }
    Some(found)
}

/// Which of several builds for one configuration counts (see [`pool_build`]).
fn rank(state: &PoolBuild) -> u8 {
    match state {
        PoolBuild::Missing => 0,
        PoolBuild::Failed(_) => 1,
        PoolBuild::Succeeded { current: false, .. } => 2,
        PoolBuild::Running(_) => 3,
        PoolBuild::Succeeded { current: true, .. } => 4,
    }
}

/// `canLayeredContinue`: whether the node controller sends `pool`'s nodes `config`'s image now:
/// the build for the pool's `spec.configuration` Succeeded and is the config's current one.
/// `None` when the pool's configuration is not known.
pub fn can_layered_continue(
    pool: &MachineConfigPool,
    config: &MachineOSConfig,
    builds: &[Arc<MachineOSBuild>],
) -> Option<bool> {
    pool_build(pool, config, builds)
        .map(|b| matches!(b, PoolBuild::Succeeded { current: true, .. }))
}

/// What the node controller writes to a candidate node of `pool` now (`syncMachineConfigPool`):
/// nothing while paused; for a pool a MachineOSConfig targets, the config's image with the
/// pool's configuration once `canLayeredContinue` holds, nothing before; otherwise the pool's
/// configuration with `desiredImage` removed.
pub fn pool_target<'s>(
    pool: &'s MachineConfigPool,
    configs: &'s [Arc<MachineOSConfig>],
    builds: &[Arc<MachineOSBuild>],
) -> PoolTarget<'s> {
    if pool.is_paused() {
        return PoolTarget::Paused;
    }
    let Some(rendered) = pool.rendered_config() else {
        return PoolTarget::Unknown;
    };
    let Some(config) = config_of(pool.name(), configs) else {
        return PoolTarget::Sends {
            config: rendered,
            image: None,
        };
    };
    match (pool_build(pool, config, builds), config.current_image()) {
        (Some(PoolBuild::Succeeded { current: true, .. }), Some(image)) => PoolTarget::Sends {
            config: rendered,
            image: Some(image),
        },
        (Some(build), _) => PoolTarget::Waiting {
            config: config.name(),
            build,
        },
        (None, _) => PoolTarget::Unknown,
    }
}

#[cfg(test)]
mod tests;
