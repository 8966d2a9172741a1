//! The kinds around the three MCO kinds that the policy reads: the cluster's release
//! (`ClusterVersion`) and the Machines of the Machine API, which boot from the Machine Config
//! Server before their Node exists. Read-only for mosc-guard; only the fields the policy uses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

use crate::core::model::{is_true, kube_resource, trimmed};
use crate::core::release::ClusterRelease;

/// `clusterversions.config.openshift.io` (v1), the singleton `version`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ClusterVersion {
    pub metadata: ObjectMeta,
    pub status: ClusterVersionStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ClusterVersionStatus {
    pub desired: Option<Release>,
    /// Updates, newest first: `state` Completed or Partial (applying, or never finished).
    pub history: Vec<UpdateHistory>,
    pub conditions: Vec<crate::core::model::Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Release {
    pub version: Option<String>,
}

/// One entry of `status.history`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct UpdateHistory {
    pub state: Option<String>,
    pub version: Option<String>,
}

impl ClusterVersion {
    /// The release the cluster runs or is upgrading to: `status.desired.version`.
    pub fn version(&self) -> Option<&str> {
        let desired = self.status.desired.as_ref();
        trimmed(desired.and_then(|d| d.version.as_deref()))
    }

    /// What the cluster runs. During an upgrade (`history[0]` Partial, or Progressing=True)
    /// the previous release's machine-os-builder keeps running until MCO itself is upgraded, so
    /// every history entry from the newest down to the newest Completed one may still be
    /// running; so may they when the history does not end on the desired release (an upgrade
    /// just requested). Entries without a version say nothing and are skipped.
    pub fn release(&self) -> ClusterRelease {
        let desired = self.version().map(str::to_string);
        let history = &self.status.history;
        let completed = |h: &UpdateHistory| h.state.as_deref() == Some("Completed");
        let upgrading = history
            .first()
            .is_some_and(|h| h.state.as_deref() == Some("Partial"))
            || is_true(&self.status.conditions, "Progressing");
        let newest_completed = history.iter().position(completed);
        let settled = !upgrading
            && newest_completed == Some(0)
            && trimmed(history[0].version.as_deref()) == desired.as_deref();
        let mut also_running: Vec<String> = Vec::new();
        if !settled {
            let upto = newest_completed.map_or(history.len(), |i| i + 1);
            for h in &history[..upto] {
                if let Some(v) = trimmed(h.version.as_deref())
                    && Some(v) != desired.as_deref()
                    && !also_running.iter().any(|a| a == v)
                {
                    also_running.push(v.to_string());
                }
            }
        }
        ClusterRelease {
            desired,
            also_running,
            upgrading,
        }
    }
}

/// What the ClusterVersion `version` (the singleton) among `versions` says the cluster runs;
/// nothing known without it.
pub fn running(versions: &[std::sync::Arc<ClusterVersion>]) -> ClusterRelease {
    versions
        .iter()
        .find(|v| v.name() == "version")
        .map(|v| v.release())
        .unwrap_or_default()
}

/// `machines.machine.openshift.io` (v1beta1), namespaced (usually `openshift-machine-api`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct Machine {
    pub metadata: ObjectMeta,
    pub spec: MachineSpec,
    pub status: MachineStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    pub provider_spec: Option<ProviderSpec>,
}

/// `spec.providerSpec`: the provider's own object, of which only `userDataSecret.name` is read
/// (every provider names the pointer Ignition's secret so).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ProviderSpec {
    pub value: Option<ProviderValue>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderValue {
    pub user_data_secret: Option<LocalRef>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Provisioning, Provisioned, Running, Deleting, Failed.
    pub phase: Option<String>,
    /// Set once the machine's Node registered.
    pub node_ref: Option<LocalRef>,
}

/// `{name: ...}`: the user-data secret's, the node's.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct LocalRef {
    pub name: Option<String>,
}

/// Label naming the MachineSet a Machine belongs to.
pub const LABEL_MACHINESET: &str = "machine.openshift.io/cluster-api-machineset";

impl Machine {
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    pub fn phase(&self) -> Option<&str> {
        self.status.phase.as_deref()
    }

    /// Joining: Provisioning or Provisioned and no Node yet. Such a machine boots (or is about
    /// to) from the Machine Config Server's Ignition, and pulls its OS image at first boot.
    pub fn is_joining(&self) -> bool {
        let node = self
            .status
            .node_ref
            .as_ref()
            .and_then(|n| n.name.as_deref())
            .is_some_and(|n| !n.is_empty());
        matches!(self.phase(), Some("Provisioning" | "Provisioned")) && !node
    }

    /// The pointer Ignition's secret, `spec.providerSpec.value.userDataSecret.name`.
    pub fn user_data_secret(&self) -> Option<&str> {
        self.spec
            .provider_spec
            .as_ref()
            .and_then(|p| p.value.as_ref())
            .and_then(|v| v.user_data_secret.as_ref())
            .and_then(|s| s.name.as_deref())
            .filter(|n| !n.is_empty())
    }

    /// Its MachineSet, by label.
    pub fn machine_set(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_MACHINESET))
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

kube_resource!(
    ClusterVersion,
    ClusterResourceScope,
    "config.openshift.io",
    "v1",
    "ClusterVersion",
    "clusterversions"
);
kube_resource!(
    Machine,
    NamespaceResourceScope,
    "machine.openshift.io",
    "v1beta1",
    "Machine",
    "machines"
);

#[cfg(test)]
mod tests;
