//! When MCO has finished a pool a recovered node was in, for `recover --wait`: `Updated` for a
//! pool without a MachineOSConfig; for one a MachineOSConfig targets, the rollout resumed: MCO
//! sends the pool's nodes the config's image again, or the build for the pool's configuration
//! runs (MCO sends the image once it succeeds). MCO reports `Updating=True` on any unpaused pool
//! not yet updated, also while it waits for a build to start, and a failed build turns it False
//! (`status.go`), so the pool's conditions alone do not say the rollout resumed.

use std::sync::Arc;

use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::core::node_controller::{PoolBuild, config_of, pool_build};

/// Where a pool stands for `recover --wait`.
#[derive(Debug, PartialEq, Eq)]
pub enum PoolState {
    /// Finished: the outcome's name (`updated`, `rolloutResumed`) and why.
    Finished(&'static str, String),
    /// Not yet: what it waits for, in words.
    Waiting(String),
}

/// Whether MCO finished `pool`: `Updated=True` and no node degraded; for a pool a
/// MachineOSConfig (of `configs`) targets, unpaused, no node degraded, and either `Updated=True`
/// or the build for the pool's configuration (of `builds`) running, or succeeded and the
/// config's current one (MCO sends the nodes its image). Otherwise what it waits for, in words.
pub fn pool_state(
    pool: &MachineConfigPool,
    configs: &[Arc<MachineOSConfig>],
    builds: &[Arc<MachineOSBuild>],
) -> PoolState {
    let condition = |t: &str| {
        pool.status
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.as_str())
    };
    let degraded = condition("NodeDegraded") == Some("True");
    let updated = condition("Updated") == Some("True");
    let counts = format!(
        "{} of {} machines updated, NodeDegraded={}",
        pool.status.updated_machine_count.unwrap_or(0),
        pool.status.machine_count.unwrap_or(0),
        condition("NodeDegraded").unwrap_or("<none>")
    );
    let name = pool.name();
    let unpause =
        format!("oc patch mcp {name} --type=merge -p '{{\"spec\":{{\"paused\":false}}}}'");
    let Some(mosc) = config_of(name, configs) else {
        return if pool.is_paused() {
            PoolState::Waiting(format!(
                "paused: waiting until you unpause it ({unpause}) and MCO finishes it ({counts})"
            ))
        } else if updated && !degraded {
            PoolState::Finished("updated", format!("Updated=True ({counts})"))
        } else {
            PoolState::Waiting(format!("waiting for Updated=True ({counts})"))
        };
    };
    let config = mosc.name();
    if pool.is_paused() {
        return PoolState::Waiting(format!(
            "paused, and MachineOSConfig {config} targets it: waiting until you unpause it \
             ({unpause}, once its build is current) and its rollout resumes ({counts})"
        ));
    }
    if degraded {
        return PoolState::Waiting(format!(
            "waiting for the rollout of MachineOSConfig {config} to resume: a node is still \
             degraded ({counts})"
        ));
    }
    let resumed = |why: String| PoolState::Finished("rolloutResumed", format!("{why} ({counts})"));
    if updated {
        return resumed(format!(
            "Updated=True: every node runs MachineOSConfig {config}'s image"
        ));
    }
    match pool_build(pool, mosc, builds) {
        Some(PoolBuild::Running(build)) => resumed(format!(
            "the rollout of MachineOSConfig {config} resumed: its build {build} for the pool's \
             configuration is running, and MCO sends the nodes its image once it succeeds"
        )),
        Some(PoolBuild::Succeeded {
            build,
            current: true,
        }) => resumed(format!(
            "the rollout of MachineOSConfig {config} resumed: MCO sends the pool's nodes the \
             image of its build {build}"
        )),
        Some(PoolBuild::Succeeded { build, .. }) => PoolState::Waiting(format!(
            "waiting for MachineOSConfig {config} to point at the image of its build {build}, \
             which succeeded ({counts})"
        )),
        Some(PoolBuild::Failed(build)) => PoolState::Waiting(format!(
            "the build {build} of MachineOSConfig {config} for the pool's configuration failed, \
             and MCO resumes the rollout only once a build succeeds: look at the build (oc \
             describe machineosbuild {build}) and rebuild (oc annotate machineosconfig {config} \
             machineconfiguration.openshift.io/rebuild=) ({counts})"
        )),
        Some(PoolBuild::Missing) => PoolState::Waiting(format!(
            "waiting for MCO to start a build of MachineOSConfig {config} for the pool's \
             configuration ({counts})"
        )),
        None => PoolState::Waiting(format!(
            "waiting for the rollout of MachineOSConfig {config} to resume: the pool's \
             configuration is not known ({counts})"
        )),
    }
}

#[cfg(test)]
mod tests;
