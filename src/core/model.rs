//! Typed views of the MCO objects mosc-guard reads: only the fields the policy uses, each optional,
//! unknown fields ignored, so a newer MCO (or a trimmed must-gather) still deserializes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::core::ClusterResourceScope;
use serde::{Deserialize, Serialize};

/// API group of every MCO object we read.
pub const GROUP: &str = "machineconfiguration.openshift.io";
/// API version of every MCO object we read.
pub const VERSION: &str = "v1";

/// Node annotations written by the MCO node controller, daemon and drain controller
/// (`pkg/daemon/constants/constants.go`).
pub mod node_annotations {
    /// What every annotation MCO writes on a node starts with.
    pub const PREFIX: &str = "machineconfiguration.openshift.io/";
    /// Digested pull spec the node should boot.
    pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
    /// Digested pull spec the node has booted.
    pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
    /// Done | Working | Degraded | Unreconcilable | Rebooting.
    pub const STATE: &str = "machineconfiguration.openshift.io/state";
    /// The daemon's words for its state (free text that differs by z-stream: never decide on it).
    pub const REASON: &str = "machineconfiguration.openshift.io/reason";
    /// The rendered MachineConfig the node should run (the node controller writes it).
    pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
    /// The rendered MachineConfig the node runs (the daemon writes it once an update is done).
    pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
    /// The daemon's request to the drain controller: `drain-<config>` or `uncordon-<config>`.
    pub const DESIRED_DRAIN: &str = "machineconfiguration.openshift.io/desiredDrain";
    /// The drain controller's answer: the request it carried out last.
    pub const LAST_APPLIED_DRAIN: &str = "machineconfiguration.openshift.io/lastAppliedDrain";
    /// `SingleReplica` on a single-node cluster, where the daemon does not drain
    /// (`getControlPlaneTopology`, `drainRequired`); any other value or none drains.
    pub const CONTROL_PLANE_TOPOLOGY: &str =
        "machineconfiguration.openshift.io/controlPlaneTopology";
}

/// Label MCO puts on every MachineOSBuild, naming its MachineOSConfig.
pub const LABEL_MACHINE_OS_CONFIG: &str = "machineconfiguration.openshift.io/machine-os-config";
/// Label MCO puts on every MachineOSBuild, naming the pool it was built for.
pub const LABEL_TARGET_POOL: &str = "machineconfiguration.openshift.io/target-machine-config-pool";
/// Node label kubelet sets to the node's operating system; MCO manages no `windows` node.
pub const LABEL_NODE_OS: &str = "kubernetes.io/os";
/// Annotation on a MachineOSConfig naming its current MachineOSBuild.
pub const ANNOTATION_CURRENT_MOSB: &str =
    "machineconfiguration.openshift.io/current-machine-os-build";
/// The user MCO's machine-os-builder runs as: every MachineOSBuild deletion MCO makes itself
/// comes from it (`pkg/controller/build/reconciler.go`).
pub const MACHINE_OS_BUILDER_USER: &str =
    "system:serviceaccount:openshift-machine-config-operator:machine-os-builder";
/// Annotation an admin sets (with a reason) to let a blocked deletion through.
pub const OVERRIDE_ANNOTATION: &str = "mosc-guard.dev/allow-deletion";
/// Annotation an admin sets on a MachineOSConfig to make MCO delete its current build and build
/// it again (`rebuildMachineOSConfig`: MCO acts on its presence, whatever its value).
pub const ANNOTATION_REBUILD: &str = "machineconfiguration.openshift.io/rebuild";
/// Label (`"true"`) MCO 4.21 on puts on the synthetic MachineOSBuild of a pre-built image
/// (`createSyntheticMachineOSBuild`), whose tag is its MachineOSConfig's push spec.
pub const LABEL_PRE_BUILT_IMAGE: &str = "machineconfiguration.openshift.io/pre-built-image";
/// Annotation MCO puts on every MachineOSBuild naming the push secret (in
/// `openshift-machine-config-operator`) it pushed with; MCO deletes the build's image with it
/// (`getObjectsForImagePruner`).
pub const ANNOTATION_PUSH_SECRET: &str =
    "machineconfiguration.openshift.io/rendered-image-push-secret";

/// `{name: ...}` reference used throughout the MCO API.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
}

/// MachineOSConfig: opts one pool into image mode.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct MachineOSConfig {
    pub metadata: ObjectMeta,
    pub spec: MachineOSConfigSpec,
    pub status: MachineOSConfigStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    pub machine_config_pool: Option<NameRef>,
    pub rendered_image_push_spec: Option<String>,
    /// The secret (in `openshift-machine-config-operator`) MCO pushes the config's images with.
    pub rendered_image_push_secret: Option<NameRef>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    pub current_image_pull_spec: Option<String>,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<NameRef>,
}

/// MachineOSBuild: one image build for one (MachineOSConfig, rendered config).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct MachineOSBuild {
    pub metadata: ObjectMeta,
    pub spec: MachineOSBuildSpec,
    pub status: MachineOSBuildStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    #[serde(rename = "machineOSConfig")]
    pub machine_os_config: Option<NameRef>,
    /// The rendered MachineConfig it was built from.
    pub machine_config: Option<NameRef>,
    /// `<repo>:<mosb-name>`: the tag MCO deletes the image by.
    pub rendered_image_push_spec: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    pub digested_image_push_spec: Option<String>,
    pub conditions: Vec<Condition>,
}

/// MachineConfigPool: names the pool a node belongs to, and says whether MCO is still
/// rolling it out.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct MachineConfigPool {
    pub metadata: ObjectMeta,
    pub spec: MachineConfigPoolSpec,
    pub status: MachineConfigPoolStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    pub node_selector: Option<LabelSelector>,
    pub paused: Option<bool>,
    /// The rendered MachineConfig the pool targets (MCO's render controller sets it).
    pub configuration: Option<NameRef>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    /// The rendered config the pool's machines are on (the MCS serves it to joining machines
    /// until one machine has updated).
    pub configuration: Option<NameRef>,
    pub conditions: Vec<Condition>,
    pub machine_count: Option<i64>,
    pub updated_machine_count: Option<i64>,
}

/// One entry of `status.conditions` (only what the policy reads).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

impl MachineOSConfig {
    /// `metadata.uid`, when the object carries one (every object a cluster serves does).
    pub fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref().filter(|u| !u.is_empty())
    }

    /// `status.currentImagePullSpec` as written (MCO compares it as an exact string).
    pub fn current_image(&self) -> Option<&str> {
        self.status
            .current_image_pull_spec
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// The pool it opts into image mode (its name must equal the pool's; the spec says which).
    pub fn pool_name(&self) -> &str {
        self.spec
            .machine_config_pool
            .as_ref()
            .map_or_else(|| self.name(), |p| p.name.as_str())
    }

    /// Whether the config names `build` as its current one, by MCO's annotation or by
    /// `status.machineOSBuild`. Every release writes the annotation when a build starts; 4.21
    /// on also write the status when it succeeds, so the two differ while a build runs.
    pub fn names_as_current(&self, build: &str) -> bool {
        annotation(&self.metadata, ANNOTATION_CURRENT_MOSB) == Some(build)
            || self
                .status
                .machine_os_build
                .as_ref()
                .is_some_and(|r| r.name == build)
    }

    /// `spec.renderedImagePushSpec` as written: the repository (and tag) its builds push to.
    pub fn push_spec(&self) -> Option<&str> {
        trimmed(self.spec.rendered_image_push_spec.as_deref())
    }

    /// `spec.renderedImagePushSecret.name`.
    pub fn push_secret(&self) -> Option<&str> {
        trimmed(named(self.spec.rendered_image_push_secret.as_ref()))
    }

    /// Its annotations' values (a pre-built image's among them), for the digests they name.
    pub fn annotation_values(&self) -> impl Iterator<Item = &str> {
        self.metadata
            .annotations
            .iter()
            .flat_map(|a| a.values().map(String::as_str))
    }

    /// Whether the rebuild annotation is set: MCO is about to delete the current build and
    /// build it again.
    pub fn rebuild_requested(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_REBUILD))
    }

    /// Whether it is being deleted (`metadata.deletionTimestamp`; a finalizer may hold it).
    pub fn being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

impl MachineOSBuild {
    /// True when this build belongs to the named MachineOSConfig, by spec or by label
    /// (MCO itself finds a config's builds by the label).
    pub fn belongs_to(&self, mosc: &str) -> bool {
        self.config_by_spec() == Some(mosc) || self.config_label() == Some(mosc)
    }

    /// `spec.machineOSConfig.name`.
    pub fn config_by_spec(&self) -> Option<&str> {
        named(self.spec.machine_os_config.as_ref())
    }

    /// The `machine-os-config` label: without it MCO's MOSB-delete handler deletes no image.
    pub fn config_label(&self) -> Option<&str> {
        label(&self.metadata, LABEL_MACHINE_OS_CONFIG)
    }

    /// The `target-machine-config-pool` label.
    pub fn pool_label(&self) -> Option<&str> {
        label(&self.metadata, LABEL_TARGET_POOL)
    }

    /// `spec.machineConfig.name`: the rendered config it was built from.
    pub fn rendered_config(&self) -> Option<&str> {
        named(self.spec.machine_config.as_ref())
    }

    /// `status.digestedImagePushSpec` as written: the image the build pushed, once it has.
    pub fn digested_image(&self) -> Option<&str> {
        trimmed(self.status.digested_image_push_spec.as_deref())
    }

    /// Whether condition `Succeeded` is True (MCO's `IsBuildSuccess`).
    pub fn succeeded(&self) -> bool {
        is_true(&self.status.conditions, "Succeeded")
    }

    /// Whether condition `Failed` or `Interrupted` is True: the build ended without an image.
    pub fn failed(&self) -> bool {
        is_true(&self.status.conditions, "Failed") || self.interrupted()
    }

    /// The uid of its controller ownerReference (`metav1.GetControllerOf`).
    pub fn controller_uid(&self) -> Option<&str> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.as_str())
    }

    /// Whether every ownerReference names `uid` (and there is one): once that owner is gone
    /// the garbage collector deletes the build.
    pub fn only_owner_is(&self, uid: &str) -> bool {
        let mut owners = self.metadata.owner_references.iter().flatten().peekable();
        owners.peek().is_some() && owners.all(|o| o.uid == uid)
    }

    /// Whether condition `Interrupted` is True.
    pub fn interrupted(&self) -> bool {
        is_true(&self.status.conditions, "Interrupted")
    }

    /// `spec.renderedImagePushSpec` as written: the tag MCO deletes the image by.
    pub fn push_spec(&self) -> Option<&str> {
        trimmed(self.spec.rendered_image_push_spec.as_deref())
    }

    /// The MachineOSConfig it belongs to: MCO's label, else `spec.machineOSConfig`.
    pub fn config_name(&self) -> Option<&str> {
        self.config_label().or_else(|| self.config_by_spec())
    }

    /// The push secret MCO names on it (the annotation MCO deletes its image with).
    pub fn push_secret(&self) -> Option<&str> {
        annotation(&self.metadata, ANNOTATION_PUSH_SECRET)
    }

    /// Whether MCO labelled it the synthetic build of a pre-built image (4.21 on).
    pub fn is_pre_built(&self) -> bool {
        label(&self.metadata, LABEL_PRE_BUILT_IMAGE) == Some("true")
    }

    /// Whether it is being deleted (`metadata.deletionTimestamp`; its `foregroundDeletion`
    /// finalizer holds it until its Job and ConfigMaps are gone).
    pub fn being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

impl MachineConfigPool {
    /// Whether the pool is paused: MCO then sends no further node to a new config or image
    /// (nodes it already sent keep updating).
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }

    /// The rendered config the Machine Config Server serves a joining machine
    /// (`clusterServer.GetConfig`): `spec.configuration` once a machine has updated
    /// (`status.updatedMachineCount > 0`), `status.configuration` before.
    pub fn served_config(&self) -> Option<&str> {
        let updated = self.status.updated_machine_count.is_none_or(|n| n > 0);
        let config = if updated {
            self.spec.configuration.as_ref()
        } else {
            self.status.configuration.as_ref()
        };
        named(config)
    }

    /// `spec.configuration.name`: the rendered config the pool targets, when known.
    pub fn rendered_config(&self) -> Option<&str> {
        named(self.spec.configuration.as_ref())
    }
}

pub(crate) fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The name a reference gives, `None` when absent or empty.
fn named(reference: Option<&NameRef>) -> Option<&str> {
    reference.map(|r| r.name.as_str()).filter(|n| !n.is_empty())
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

/// A value without surrounding whitespace, `None` when empty.
pub(crate) fn trimmed(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// The override reason, if an admin set one on the object being deleted.
pub fn override_reason(meta: &ObjectMeta) -> Option<&str> {
    annotation(meta, OVERRIDE_ANNOTATION)
}

/// Implements `kube::Resource` for a kind we read, so `kube::Api` and the reflectors can list
/// and watch it without a generated client; and `name()`, empty when unset.
macro_rules! kube_resource {
    ($ty:ty, $scope:ty, $group:expr, $version:expr, $kind:literal, $plural:literal) => {
        impl $ty {
            pub fn name(&self) -> &str {
                self.metadata.name.as_deref().unwrap_or_default()
            }
        }

        impl kube::core::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($kind)
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($group)
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($version)
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($plural)
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
pub(crate) use kube_resource;

/// Implements `kube::Resource` for a cluster-scoped MCO kind.
macro_rules! mco_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        kube_resource!($ty, ClusterResourceScope, GROUP, VERSION, $kind, $plural);
    };
}

mco_resource!(MachineOSConfig, "MachineOSConfig", "machineosconfigs");
mco_resource!(MachineOSBuild, "MachineOSBuild", "machineosbuilds");
mco_resource!(MachineConfigPool, "MachineConfigPool", "machineconfigpools");

#[cfg(test)]
mod tests;
