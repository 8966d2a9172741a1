//! mosc-guard's recovery marker: the annotation `mosc-guard.dev/recovery`, written by the
//! cancelling patch in the same request, holding MCO's annotations as read before it and the
//! node's boot ID (MCO ignores it). It makes a recovery idempotent: a node an earlier run cancelled
//! shows its original target nowhere else, so a re-run recognises it as cancelled and waiting,
//! patches nothing twice, and `--apply` waits for it. It stays as the record; a later cancel
//! overwrites it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::node::{MARKER, RecoveryNode};

/// What the marker holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Marker {
    /// Who wrote it, for a person reading the node.
    pub by: String,
    /// The node's boot ID when it was cancelled (`None` if the node did not report one).
    #[serde(rename = "bootID")]
    pub boot_id: Option<String>,
    /// MCO's annotations as read right before the cancelling patch.
    pub annotations: BTreeMap<String, String>,
}

impl Marker {
    /// The marker for cancelling `node` as read now.
    pub fn for_node(node: &RecoveryNode) -> Self {
        Marker {
            by: "mosc-guard recover".to_string(),
            boot_id: node.boot_id.clone(),
            annotations: node.mco_annotations(),
        }
    }

    /// The annotation value (compact JSON).
    pub fn encode(&self) -> String {
        // A struct of strings always encodes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The node's marker, if it carries one that parses (an edited, broken one counts as none).
    pub fn read(node: &RecoveryNode) -> Option<Marker> {
        serde_json::from_str(node.annotations.get(MARKER)?).ok()
    }
}
