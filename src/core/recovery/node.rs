//! A node as recovery reads it: more than the policy's lean node ([`crate::core::node::NodeMeta`],
//! kept small for 50,000-node caches) and decoded from the full Node (a live list or a
//! must-gather), because a recovery plan needs the drain annotations, `spec.unschedulable` and
//! the boot ID as well as the image annotations, and records every annotation MCO wrote.
//!
//! Only MCO's annotations (`machineconfiguration.openshift.io/...`) and mosc-guard's own
//! recovery marker are kept; the others (OVN's, the machine API's JSON) are dropped at decoding.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::core::model::node_annotations::{
    CONTROL_PLANE_TOPOLOGY, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN,
    DESIRED_IMAGE, LAST_APPLIED_DRAIN, PREFIX, STATE,
};
use crate::core::model::trimmed;
use crate::core::node::NodeImages;
use crate::core::selector::Labels;

/// The annotation of mosc-guard's recovery marker ([`super::marker`]), kept with MCO's.
pub const MARKER: &str = "mosc-guard.dev/recovery";

/// The node recovery plans for. Built from a Node object by its `Deserialize`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "WireNode", into = "WireNode")]
pub struct RecoveryNode {
    pub name: String,
    /// `metadata.uid`: what the Event about the node names.
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// MCO's annotations and mosc-guard's marker, as written.
    pub annotations: BTreeMap<String, String>,
    /// `spec.unschedulable`: cordoned (by the drain controller, or by hand).
    pub unschedulable: bool,
    /// `status.nodeInfo.bootID`: changes with every boot, so it tells a no-op update from a reboot.
    pub boot_id: Option<String>,
}

impl RecoveryNode {
    /// An annotation's value, trimmed; `None` when absent or empty.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        trimmed(self.annotations.get(key).map(String::as_str))
    }

    pub fn state(&self) -> Option<&str> {
        self.annotation(STATE)
    }

    pub fn desired_image(&self) -> Option<&str> {
        self.annotation(DESIRED_IMAGE)
    }

    pub fn current_image(&self) -> Option<&str> {
        self.annotation(CURRENT_IMAGE)
    }

    pub fn desired_config(&self) -> Option<&str> {
        self.annotation(DESIRED_CONFIG)
    }

    pub fn current_config(&self) -> Option<&str> {
        self.annotation(CURRENT_CONFIG)
    }

    pub fn desired_drain(&self) -> Option<&str> {
        self.annotation(DESIRED_DRAIN)
    }

    pub fn last_applied_drain(&self) -> Option<&str> {
        self.annotation(LAST_APPLIED_DRAIN)
    }

    /// Its images and state, as [`NodeImages::of`] reads a lean node.
    pub fn images(&self) -> NodeImages<'_> {
        NodeImages {
            desired: self.desired_image(),
            current: self.current_image(),
            state: self.state(),
        }
    }

    /// Whether the daemon skips the drain on this node: MCO's `getControlPlaneTopology` reads
    /// `SingleReplica` as single-node and every other value (or none) as highly available.
    pub fn single_node(&self) -> bool {
        self.annotation(CONTROL_PLANE_TOPOLOGY) == Some("SingleReplica")
    }

    /// MCO's annotations as read (without mosc-guard's marker): what a recovery records.
    pub fn mco_annotations(&self) -> BTreeMap<String, String> {
        self.annotations
            .iter()
            .filter(|(k, _)| k.starts_with(PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl Labels for RecoveryNode {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// A Node as the API server sends it, reduced to what [`RecoveryNode`] keeps.
#[derive(Default, Deserialize, Serialize)]
#[serde(default)]
struct WireNode {
    metadata: WireMeta,
    spec: WireSpec,
    status: WireStatus,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize, Serialize)]
struct WireSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    unschedulable: Option<bool>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    node_info: Option<WireNodeInfo>,
}

#[derive(Default, Deserialize, Serialize)]
struct WireNodeInfo {
    #[serde(rename = "bootID")]
    boot_id: Option<String>,
}

impl From<WireNode> for RecoveryNode {
    fn from(wire: WireNode) -> Self {
        let annotations = wire
            .metadata
            .annotations
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k.starts_with(PREFIX) || k == MARKER)
            .collect();
        RecoveryNode {
            name: wire.metadata.name.unwrap_or_default(),
            uid: wire.metadata.uid.filter(|u| !u.is_empty()),
            resource_version: wire.metadata.resource_version,
            labels: wire.metadata.labels.unwrap_or_default(),
            annotations,
            unschedulable: wire.spec.unschedulable == Some(true),
            boot_id: wire
                .status
                .node_info
                .and_then(|i| i.boot_id)
                .filter(|b| !b.is_empty()),
        }
    }
}

impl From<RecoveryNode> for WireNode {
    fn from(node: RecoveryNode) -> Self {
        WireNode {
            metadata: WireMeta {
                name: Some(node.name),
                uid: node.uid,
                resource_version: node.resource_version,
                labels: Some(node.labels),
                annotations: Some(node.annotations),
            },
            spec: WireSpec {
                unschedulable: node.unschedulable.then_some(true),
            },
            status: WireStatus {
                node_info: node.boot_id.map(|b| WireNodeInfo { boot_id: Some(b) }),
            },
        }
    }
}

#[cfg(test)]
mod tests;
