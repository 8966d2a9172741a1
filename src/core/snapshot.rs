//! A point-in-time set of the objects the policy reads.
//!
//! Every front end (webhook caches, live list, must-gather directory) fills one of these;
//! the policy never performs I/O itself. Objects are shared (`Arc`) so a snapshot taken
//! from the reflector stores costs one reference count per object, not a deep copy.

use std::sync::Arc;

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
