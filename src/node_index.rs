//! An index of nodes by the digests of their images, kept current by the node watch, so a
//! decision reads only the nodes that can matter instead of every node in the cluster.
//!
//! In a settled cluster almost no node is mid-update, so the in-flight set is tiny and a
//! decision over 50,000 nodes touches a handful. The index only narrows: it keeps a node
//! as a candidate unless it is certain the node cannot match, and the policy re-checks
//! every candidate. Nodes whose image has no parseable digest are always candidates.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::image::ImageKey;
use crate::model::{NodeMeta, node_annotations};
use crate::policy::PolicyMode;

/// Distinct pull specs parsed before the memo is cleared (clusters use a handful).
const MEMO_LIMIT: usize = 4096;

type Nodes = BTreeMap<String, Arc<NodeMeta>>;

#[derive(Default)]
pub struct NodeIndex {
    /// Desired digest -> nodes that have not reached their desired image.
    in_flight: HashMap<String, Nodes>,
    /// Current digest -> nodes running it.
    running: HashMap<String, Nodes>,
    /// Nodes with an image annotation whose digest could not be read.
    unindexed: Nodes,
    /// Where each node is filed, for updates and removal.
    filed: HashMap<String, Filed>,
    /// Pull spec -> digest hex, so a relist parses each distinct spec once.
    memo: HashMap<String, Option<String>>,
}

#[derive(Default, Clone, PartialEq, Eq)]
struct Filed {
    in_flight: Option<String>,
    running: Option<String>,
    unindexed: bool,
}

impl NodeIndex {
    /// Adds or replaces a node.
    pub fn upsert(&mut self, node: Arc<NodeMeta>) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let filed = self.classify(&node);
        self.remove(&name);
        if let Some(d) = &filed.in_flight {
            self.in_flight
                .entry(d.clone())
                .or_default()
                .insert(name.clone(), Arc::clone(&node));
        }
        if let Some(d) = &filed.running {
            self.running
                .entry(d.clone())
                .or_default()
                .insert(name.clone(), Arc::clone(&node));
        }
        if filed.unindexed {
            self.unindexed.insert(name.clone(), node);
        }
        if filed != Filed::default() {
            self.filed.insert(name, filed);
        }
    }

    /// Forgets a node.
    pub fn remove(&mut self, name: &str) {
        let Some(filed) = self.filed.remove(name) else {
            return;
        };
        for (map, digest) in [
            (&mut self.in_flight, filed.in_flight),
            (&mut self.running, filed.running),
        ] {
            if let Some(d) = digest
                && let Some(nodes) = map.get_mut(&d)
            {
                nodes.remove(name);
                if nodes.is_empty() {
                    map.remove(&d);
                }
            }
        }
        if filed.unindexed {
            self.unindexed.remove(name);
        }
    }

    /// Nodes that may block a deletion guarding `digests` under `mode`.
    pub fn candidates(&self, digests: &BTreeSet<String>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        let mut out: Nodes = self.unindexed.clone();
        let mut take = |map: &HashMap<String, Nodes>| {
            for d in digests {
                if let Some(nodes) = map.get(d) {
                    out.extend(nodes.iter().map(|(k, v)| (k.clone(), Arc::clone(v))));
                }
            }
        };
        take(&self.in_flight);
        if mode == PolicyMode::InUse {
            take(&self.running);
        }
        out.into_values().collect()
    }

    /// Nodes filed anywhere (nodes without image annotations are not kept).
    pub fn len(&self) -> usize {
        self.filed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.filed.is_empty()
    }

    fn classify(&mut self, node: &NodeMeta) -> Filed {
        let read = |key| {
            node.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(|v: &String| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let (desired, current) = (
            read(node_annotations::DESIRED_IMAGE),
            read(node_annotations::CURRENT_IMAGE),
        );
        let mut filed = Filed::default();
        let desired_digest = desired.as_deref().map(|d| self.digest(d));
        let current_digest = current.as_deref().map(|c| self.digest(c));
        let reached = match (&desired, &current) {
            (Some(d), Some(c)) => {
                d == c
                    || (current_digest == desired_digest
                        && ImageKey::parse(d) == ImageKey::parse(c))
            }
            _ => false,
        };
        match desired_digest {
            Some(Some(hex)) if !reached => filed.in_flight = Some(hex),
            Some(None) => filed.unindexed = true,
            _ => {}
        }
        match current_digest {
            Some(Some(hex)) => filed.running = Some(hex),
            Some(None) => filed.unindexed = true,
            None => {}
        }
        filed
    }

    fn digest(&mut self, spec: &str) -> Option<String> {
        if let Some(hit) = self.memo.get(spec) {
            return hit.clone();
        }
        if self.memo.len() >= MEMO_LIMIT {
            self.memo.clear();
        }
        let hex = ImageKey::parse(spec).digest_hex().map(str::to_string);
        self.memo.insert(spec.to_string(), hex.clone());
        hex
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "quay.io/x/ocb-image@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "quay.io/x/ocb-image@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn node(name: &str, desired: Option<&str>, current: Option<&str>) -> Arc<NodeMeta> {
        let mut ann = serde_json::Map::new();
        if let Some(d) = desired {
            ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
        }
        if let Some(c) = current {
            ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "annotations": ann}}))
                .expect("node"),
        )
    }

    fn names(v: Vec<Arc<NodeMeta>>) -> Vec<String> {
        v.into_iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    }

    fn digests(specs: &[&str]) -> BTreeSet<String> {
        specs
            .iter()
            .filter_map(|s| ImageKey::parse(s).digest_hex().map(str::to_string))
            .collect()
    }

    #[test]
    fn only_unreached_nodes_are_in_flight_candidates() {
        let mut idx = NodeIndex::default();
        idx.upsert(node("rolling", Some(A), Some(B)));
        idx.upsert(node("settled", Some(A), Some(A)));
        idx.upsert(node("respelled", Some(A), Some(&A.replace("@", ":t@"))));
        idx.upsert(node("plain", None, None));
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["rolling"]
        );
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InUse)),
            ["respelled", "rolling", "settled"]
        );
        assert_eq!(
            names(idx.candidates(&digests(&[B]), PolicyMode::InUse)),
            ["rolling"]
        );
        assert_eq!(idx.len(), 3, "nodes without images are not kept");
    }

    #[test]
    fn updates_move_and_removal_forgets() {
        let mut idx = NodeIndex::default();
        idx.upsert(node("n", Some(A), None));
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["n"]
        );
        idx.upsert(node("n", Some(A), Some(A)));
        assert!(
            idx.candidates(&digests(&[A]), PolicyMode::InFlight)
                .is_empty()
        );
        idx.upsert(node("n", Some(B), Some(A)));
        assert_eq!(
            names(idx.candidates(&digests(&[B]), PolicyMode::InFlight)),
            ["n"]
        );
        idx.remove("n");
        assert!(idx.is_empty());
        assert!(
            idx.candidates(&digests(&[A, B]), PolicyMode::InUse)
                .is_empty()
        );
    }

    #[test]
    fn unparseable_images_are_always_candidates() {
        let mut idx = NodeIndex::default();
        idx.upsert(node("odd", Some("Not A Ref"), None));
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["odd"]
        );
        assert_eq!(
            names(idx.candidates(&BTreeSet::new(), PolicyMode::InFlight)),
            ["odd"]
        );
    }
}
