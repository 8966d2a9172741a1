//! The cancelling patch: one JSON patch per node that first tests what the plan read (so the
//! API server refuses it if anything moved), then sets `desiredImage` back to `currentImage`
//! (removes it when the node has none: MCO's node controller reads a present empty value as a
//! rollback, so never `""`) and `desiredConfig` back to `currentConfig`, and writes the marker.
//!
//! It never writes `state`, `reason`, `currentConfig`, `currentImage` or the drain annotations
//! (the daemon's on-disk state overrides them, or the drain controller owns them) and never
//! uncordons: the daemon's no-op update does both.

use serde_json::{Value, json};

use crate::core::model::node_annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE,
    LAST_APPLIED_DRAIN, STATE,
};

use super::marker::Marker;
use super::node::{MARKER, RecoveryNode};

/// A node's cancelling patch: RFC 6902 operations.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePatch {
    pub ops: Vec<Value>,
}

/// `/metadata/annotations/<key>` as a JSON pointer (`~` and `/` escaped).
fn annotation_path(key: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

impl NodePatch {
    /// The patch that cancels `node`'s target as read, recording `marker`. `cordoned`: the plan
    /// relied on `spec.unschedulable` (every node but a single-node cluster's), so it is tested
    /// too.
    pub fn cancel(node: &RecoveryNode, marker: &Marker, cordoned: bool) -> NodePatch {
        let raw = |key: &str| node.annotations.get(key);
        let mut ops: Vec<Value> = [
            STATE,
            DESIRED_IMAGE,
            CURRENT_IMAGE,
            DESIRED_CONFIG,
            CURRENT_CONFIG,
            DESIRED_DRAIN,
            LAST_APPLIED_DRAIN,
        ]
        .into_iter()
        .filter_map(|key| {
            let value = raw(key)?;
            Some(json!({"op": "test", "path": annotation_path(key), "value": value}))
        })
        .collect();
        if cordoned {
            ops.push(json!({"op": "test", "path": "/spec/unschedulable", "value": true}));
        }
        ops.push(match raw(CURRENT_IMAGE).filter(|v| !v.trim().is_empty()) {
            Some(current) => {
                json!({"op": "replace", "path": annotation_path(DESIRED_IMAGE), "value": current})
            }
            None => json!({"op": "remove", "path": annotation_path(DESIRED_IMAGE)}),
        });
        if let Some(current) = raw(CURRENT_CONFIG) {
            ops.push(
                json!({"op": "replace", "path": annotation_path(DESIRED_CONFIG), "value": current}),
            );
        }
        ops.push(json!({"op": "add", "path": annotation_path(MARKER), "value": marker.encode()}));
        NodePatch { ops }
    }

    /// The patch as compact JSON (what `-p` takes and the API server receives).
    pub fn to_json(&self) -> String {
        Value::Array(self.ops.clone()).to_string()
    }

    /// The exact command a person runs for it, every argument shell-quoted.
    pub fn command(&self, node: &str) -> String {
        let json = self.to_json();
        ["oc", "patch", "node", node, "--type=json", "-p", &json]
            .map(shell_word)
            .join(" ")
    }
}

/// One argument for a POSIX shell: as is when it holds only characters no shell treats
/// specially, otherwise in single quotes (a `'` inside written as `'\''`). The demo shows its
/// commands with it too.
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}
