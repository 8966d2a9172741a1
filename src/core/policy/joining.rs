//! The joining-machine rule (4.21 and later, docs/policy.md rule 9): a provisioning machine pulls
//! its pool's layered image at first boot, before its Node exists, when the Machine Config Server
//! serves it (`resolveDesiredImageForPool`). A machine joins the pool its pointer Ignition's
//! secret names (`<pool>-user-data`); one whose secret names no pool counts for every pool.

use std::sync::Arc;

use crate::core::cluster::Machine;
use crate::core::image::repo_of;
use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::core::snapshot::Snapshot;

use super::images::GuardedImages;
use super::pools::config_of;
use super::verdict::{Deletion, JoiningMachine};

/// Joining machines that would pull one of the guarded images.
pub(super) fn joining_machines(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    guarded: &GuardedImages,
) -> Vec<JoiningMachine> {
    if guarded.is_empty() || !snapshot.rules().serves_joining_machines {
        return Vec::new();
    }
    // Each pool's served image, when it is one of the guarded ones.
    let served: Vec<(&str, &str)> = snapshot
        .pools
        .iter()
        .filter_map(|p| {
            let config = config_of(snapshot, target, p.name())?;
            let image = served_image(p, config, &snapshot.machine_os_builds)?;
            guarded.find(image).map(|_| (p.name(), image))
        })
        .collect();
    if served.is_empty() {
        return Vec::new();
    }
    let mut joining: Vec<JoiningMachine> = snapshot
        .machines
        .iter()
        .filter(|m| m.is_joining())
        .filter_map(|m| {
            let pool = pool_of(m, &snapshot.pools);
            let (pool_name, image) = served
                .iter()
                .find(|(p, _)| pool.is_none_or(|mine| mine == *p))?;
            let hit = guarded.find(image)?;
            Some(JoiningMachine {
                machine: format!("{}/{}", m.namespace(), m.name()),
                phase: m.phase().unwrap_or_default().to_string(),
                machine_set: m.machine_set().map(str::to_string),
                pool: pool_name.to_string(),
                pool_known: pool.is_some(),
                image: hit.image.clone(),
                machine_os_build: hit.machine_os_build.clone(),
            })
        })
        .collect();
    joining.sort_by(|a, b| a.machine.cmp(&b.machine));
    joining
}

/// The image the MCS serves machines joining `pool`, if any (`resolveDesiredImageForPool`).
/// Where the objects do not say (no rendered config, no machine count), it counts as served.
fn served_image<'a>(
    pool: &MachineConfigPool,
    config: &'a MachineOSConfig,
    builds: &[Arc<MachineOSBuild>],
) -> Option<&'a str> {
    let image = config.current_image()?;
    let rendered = pool.served_config();
    let built = builds.iter().any(|b| {
        b.config_by_spec() == Some(config.name())
            && rendered.is_none_or(|r| b.rendered_config() == Some(r))
            && b.succeeded()
    });
    let updated = pool.status.updated_machine_count.is_none_or(|n| n > 0);
    (built && updated && !internal_registry(image)).then_some(image)
}

/// Whether `image` is in the cluster's internal registry, by its Service's host name
/// (`<service>.openshift-image-registry.svc[.cluster.local]`). MCO also counts the registry's
/// Routes; a Route host counts as external here, which can only refuse more.
fn internal_registry(image: &str) -> bool {
    repo_of(image).is_some_and(|r| {
        let host = r.registry.split(':').next().unwrap_or_default();
        host.ends_with(".openshift-image-registry.svc")
            || host.ends_with(".openshift-image-registry.svc.cluster.local")
    })
}

/// The pool a machine joins, from its pointer Ignition's secret `<pool>-user-data`, if that
/// names a pool of the snapshot.
fn pool_of<'p>(machine: &Machine, pools: &'p [Arc<MachineConfigPool>]) -> Option<&'p str> {
    let pool = machine.user_data_secret()?.strip_suffix("-user-data")?;
    pools.iter().map(|p| p.name()).find(|p| *p == pool)
}
