//! A point-in-time set of the objects the policy reads. Every front end (webhook caches, live
//! list, dump) fills one; objects are shared (`Arc`), so a snapshot of the reflector stores costs a
//! reference count per object, not a deep copy.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::cluster::Machine;
use crate::core::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig};
use crate::core::node::NodeMeta;
use crate::core::release::{ClusterRelease, Rules};

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub machine_os_configs: Vec<Arc<MachineOSConfig>>,
    pub machine_os_builds: Vec<Arc<MachineOSBuild>>,
    pub pools: Vec<Arc<MachineConfigPool>>,
    pub nodes: Vec<Arc<NodeMeta>>,
    /// The Machine API's Machines (empty where it is not served: user-provisioned clusters).
    pub machines: Vec<Arc<Machine>>,
    /// What the cluster runs (its `ClusterVersion`: the desired release, and any release an
    /// upgrade in flight may still be running), or the release an admin gave.
    pub release: ClusterRelease,
}

impl Snapshot {
    /// The rules of the snapshot's release (see [`crate::core::release`]).
    pub fn rules(&self) -> Rules {
        Rules::for_release(&self.release)
    }

    /// `--openshift-version`: decide with `version`'s rules whatever the cluster says. Every
    /// source applies it through here.
    pub fn with_release_override(mut self, version: Option<&str>) -> Self {
        if let Some(v) = version {
            self.release = ClusterRelease::given(v);
        }
        self
    }

    /// Every object besides the nodes by kind, namespace, name, uid and resourceVersion, and the
    /// release: two snapshots with equal versions hold the same objects, whichever source
    /// (a watch cache, a fresh list) read them. `None` if an object carries no resourceVersion
    /// (a dump, a hand-built snapshot): nothing can be told from it.
    pub fn versions(&self) -> Option<Versions> {
        let of = |kind: u8, meta: &ObjectMeta| {
            Some((
                kind,
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
                meta.uid.clone().unwrap_or_default(),
                meta.resource_version.clone()?,
            ))
        };
        let mut objects = self
            .machine_os_configs
            .iter()
            .map(|o| of(0, &o.metadata))
            .chain(self.machine_os_builds.iter().map(|o| of(1, &o.metadata)))
            .chain(self.pools.iter().map(|o| of(2, &o.metadata)))
            .chain(self.machines.iter().map(|o| of(3, &o.metadata)))
            .collect::<Option<Vec<_>>>()?;
        objects.sort_unstable();
        Some(Versions {
            objects,
            release: self.release.clone(),
        })
    }

    pub fn machine_os_config(&self, name: &str) -> Option<&MachineOSConfig> {
        self.machine_os_configs
            .iter()
            .map(Arc::as_ref)
            .find(|m| m.name() == name)
    }

    pub fn machine_os_build(&self, name: &str) -> Option<&MachineOSBuild> {
        self.machine_os_builds
            .iter()
            .map(Arc::as_ref)
            .find(|m| m.name() == name)
    }
}

/// What [`Snapshot::versions`] compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    objects: Vec<(u8, String, String, String, String)>,
    release: ClusterRelease,
}

#[cfg(test)]
mod tests;
