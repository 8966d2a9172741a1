//! Typed views of the MCO objects mosc-guard reads.
//!
//! Only the fields the policy uses are modelled; every field is optional and unknown
//! fields are ignored, so a newer MCO (or a trimmed must-gather) still deserializes.
//! Nodes are read as metadata only: the annotations MCO writes are all we need.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::core::{ClusterResourceScope, Resource};
use serde::{Deserialize, Serialize};

/// API group of every MCO object we read.
pub const GROUP: &str = "machineconfiguration.openshift.io";
/// API version of every MCO object we read.
pub const VERSION: &str = "v1";

/// Node annotations written by the MCO node controller and daemon.
pub mod node_annotations {
    /// Digested pull spec the node should boot.
    pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
    /// Digested pull spec the node has booted.
    pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
    /// Done | Working | Degraded | Unreconcilable | Rebooting.
    pub const STATE: &str = "machineconfiguration.openshift.io/state";
}

/// Label MCO puts on every MachineOSBuild, naming its MachineOSConfig.
pub const LABEL_MACHINE_OS_CONFIG: &str = "machineconfiguration.openshift.io/machine-os-config";
/// Annotation on a MachineOSConfig naming its current MachineOSBuild.
pub const ANNOTATION_CURRENT_MOSB: &str =
    "machineconfiguration.openshift.io/current-machine-os-build";
/// Annotation an admin sets (with a reason) to let a blocked deletion through.
pub const OVERRIDE_ANNOTATION: &str = "mosc-guard.dev/allow-deletion";

/// A node as the policy sees it: name, labels and the image annotations (see [`crate::node`]).
pub use crate::node::NodeMeta;

/// `{name: ...}` reference used throughout the MCO API.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
}

/// MachineOSConfig: opts one pool into image mode.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MachineOSConfig {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineOSConfigSpec,
    #[serde(default)]
    pub status: MachineOSConfigStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    #[serde(default)]
    pub machine_config_pool: Option<NameRef>,
    #[serde(default)]
    pub rendered_image_push_spec: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    #[serde(default)]
    pub current_image_pull_spec: Option<String>,
    #[serde(default, rename = "machineOSBuild")]
    pub machine_os_build: Option<NameRef>,
}

/// MachineOSBuild: one image build for one (MachineOSConfig, rendered config).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MachineOSBuild {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineOSBuildSpec,
    #[serde(default)]
    pub status: MachineOSBuildStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    #[serde(default, rename = "machineOSConfig")]
    pub machine_os_config: Option<NameRef>,
    #[serde(default)]
    pub rendered_image_push_spec: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    #[serde(default)]
    pub digested_image_push_spec: Option<String>,
}

/// MachineConfigPool: names the pool a node belongs to, and says whether MCO is still
/// rolling it out.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MachineConfigPool {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineConfigPoolSpec,
    #[serde(default)]
    pub status: MachineConfigPoolStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    #[serde(default)]
    pub node_selector: Option<LabelSelector>,
    #[serde(default)]
    pub paused: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    #[serde(default)]
    pub conditions: Vec<PoolCondition>,
    #[serde(default)]
    pub machine_count: Option<i64>,
    #[serde(default)]
    pub updated_machine_count: Option<i64>,
}

/// One entry of a pool's `status.conditions` (only what the policy reads).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct PoolCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

impl MachineOSConfig {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The pool it opts into image mode (its name must equal the pool's; the spec says which).
    pub fn pool_name(&self) -> &str {
        self.spec
            .machine_config_pool
            .as_ref()
            .map_or_else(|| self.name(), |p| p.name.as_str())
    }

    /// Name of the MachineOSBuild MOSC status (or MCO's annotation) calls current.
    pub fn current_build_name(&self) -> Option<&str> {
        self.status
            .machine_os_build
            .as_ref()
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
            .or_else(|| annotation(&self.metadata, ANNOTATION_CURRENT_MOSB))
    }
}

impl MachineOSBuild {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// True when this build belongs to the named MachineOSConfig, by spec or by label
    /// (MCO itself finds a config's builds by the label).
    pub fn belongs_to(&self, mosc: &str) -> bool {
        let by_spec = self
            .spec
            .machine_os_config
            .as_ref()
            .is_some_and(|r| r.name == mosc);
        by_spec || label(&self.metadata, LABEL_MACHINE_OS_CONFIG) == Some(mosc)
    }
}

impl MachineConfigPool {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether the pool is paused: MCO then sends no further node to a new config or image
    /// (nodes it already sent keep updating).
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }
}

/// The image annotations MCO writes on a node, trimmed; empty values count as absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeImages<'a> {
    pub desired: Option<&'a str>,
    pub current: Option<&'a str>,
    pub state: Option<&'a str>,
}

impl<'a> NodeImages<'a> {
    pub fn of(node: &'a NodeMeta) -> Self {
        NodeImages {
            desired: trimmed(node.desired_image()),
            current: trimmed(node.current_image()),
            state: trimmed(node.state()),
        }
    }
}

/// A non-empty annotation value.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    non_empty(meta.annotations.as_ref(), key)
}

/// A non-empty label value.
pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    non_empty(meta.labels.as_ref(), key)
}

fn non_empty<'a>(map: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    trimmed(map.and_then(|m| m.get(key)).map(String::as_str))
}

fn trimmed(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// The override reason, if an admin set one on the object being deleted.
pub fn override_reason(meta: &ObjectMeta) -> Option<&str> {
    annotation(meta, OVERRIDE_ANNOTATION)
}

/// Implements `kube::Resource` for a cluster-scoped MCO kind, so `kube::Api` and the
/// reflectors can list and watch it without a generated client.
macro_rules! mco_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

mco_resource!(MachineOSConfig, "MachineOSConfig", "machineosconfigs");
mco_resource!(MachineOSBuild, "MachineOSBuild", "machineosbuilds");
mco_resource!(MachineConfigPool, "MachineConfigPool", "machineconfigpools");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_and_missing_fields_are_tolerated() {
        let mosc: MachineOSConfig = serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}, "imageBuilder": {"imageBuilderType": "Job"}},
            "status": {"somethingNew": [1, 2]}
        }))
        .expect("tolerant decode");
        assert_eq!(mosc.name(), "worker");
        assert!(mosc.status.current_image_pull_spec.is_none());
        let empty: MachineOSBuild = serde_json::from_value(json!({})).expect("empty object");
        assert_eq!(empty.name(), "");
    }

    #[test]
    fn build_membership_by_spec_or_label() {
        let by_label: MachineOSBuild = serde_json::from_value(json!({
            "metadata": {"name": "b", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}}
        }))
        .expect("decode");
        let by_spec: MachineOSBuild = serde_json::from_value(json!({
            "metadata": {"name": "b"}, "spec": {"machineOSConfig": {"name": "worker"}}
        }))
        .expect("decode");
        assert!(by_label.belongs_to("worker") && by_spec.belongs_to("worker"));
        assert!(!by_label.belongs_to("infra"));
    }

    #[test]
    fn blank_override_is_not_an_override() {
        let meta = ObjectMeta {
            annotations: Some([(OVERRIDE_ANNOTATION.to_string(), "  ".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(override_reason(&meta), None);
    }
}
