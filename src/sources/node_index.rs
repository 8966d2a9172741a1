//! An index of nodes by the digests of their images, kept current by the node watch, so a
//! decision reads only the nodes that can matter instead of every node in the cluster.
//!
//! In a settled cluster almost no node is mid-update, so the in-flight set is tiny and a
//! decision over 50,000 nodes touches a handful. The index only narrows: it keeps a node
//! as a candidate unless it is certain the node cannot match, and the policy re-checks
//! every candidate. Nodes whose image has no parseable digest are always candidates.
//! It holds names only; the node objects stay in the node cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::core::image::ImageKey;
use crate::core::node::NodeImages;
use crate::core::node::NodeMeta;
use crate::core::policy::PolicyMode;

/// Distinct pull specs parsed before the memo is cleared (clusters use a handful).
const MEMO_LIMIT: usize = 4096;

/// Names and digests are shared (`Arc<str>`) with the node cache and across nodes: a pool of
/// 50,000 nodes on one image files 50,000 pointers to one digest, not 50,000 copies of it.
#[derive(Default)]
pub struct NodeIndex {
    /// Desired digest -> nodes that have not reached their desired image.
    in_flight: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Current digest -> nodes running it.
    running: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Nodes with an image annotation whose digest could not be read.
    unindexed: BTreeSet<Arc<str>>,
    /// Where each node is filed, for updates and removal.
    filed: HashMap<Arc<str>, Filed>,
    /// Pull spec -> digest hex, so a relist parses each distinct spec once.
    memo: HashMap<String, Option<Arc<str>>>,
}

#[derive(Default, Clone, PartialEq, Eq)]
struct Filed {
    in_flight: Option<Arc<str>>,
    running: Option<Arc<str>>,
    unindexed: bool,
}

impl NodeIndex {
    /// Adds or replaces a node.
    pub fn upsert(&mut self, node: &NodeMeta) {
        let name = Arc::clone(node.shared_name());
        let filed = self.classify(node);
        self.remove(&name);
        if let Some(d) = &filed.in_flight {
            self.in_flight
                .entry(Arc::clone(d))
                .or_default()
                .insert(Arc::clone(&name));
        }
        if let Some(d) = &filed.running {
            self.running
                .entry(Arc::clone(d))
                .or_default()
                .insert(Arc::clone(&name));
        }
        if filed.unindexed {
            self.unindexed.insert(Arc::clone(&name));
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

    /// Names of the nodes that may block a deletion guarding `digests` under `mode`.
    pub fn candidates(&self, digests: &BTreeSet<String>, mode: PolicyMode) -> BTreeSet<Arc<str>> {
        let mut out = self.unindexed.clone();
        let mut take = |map: &HashMap<Arc<str>, BTreeSet<Arc<str>>>| {
            for d in digests {
                if let Some(nodes) = map.get(d.as_str()) {
                    out.extend(nodes.iter().cloned());
                }
            }
        };
        take(&self.in_flight);
        if mode == PolicyMode::InUse {
            take(&self.running);
        }
        out
    }

    /// Names of the nodes that have not reached their desired image, and of those whose images
    /// could not be read (each once).
    pub fn unreached(&self) -> BTreeSet<&Arc<str>> {
        self.in_flight
            .values()
            .flatten()
            .chain(&self.unindexed)
            .collect()
    }

    /// Nodes filed anywhere (nodes without image annotations are not kept).
    pub fn len(&self) -> usize {
        self.filed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.filed.is_empty()
    }

    fn classify(&mut self, node: &NodeMeta) -> Filed {
        let images = NodeImages::of(node);
        let mut filed = Filed::default();
        let reached = images.reached();
        match images.desired.map(|d| self.digest(d)) {
            Some(Some(hex)) if !reached => filed.in_flight = Some(hex),
            Some(None) => filed.unindexed = true,
            _ => {}
        }
        match images.current.map(|c| self.digest(c)) {
            Some(Some(hex)) => filed.running = Some(hex),
            Some(None) => filed.unindexed = true,
            None => {}
        }
        filed
    }

    fn digest(&mut self, spec: &str) -> Option<Arc<str>> {
        if let Some(hit) = self.memo.get(spec) {
            return hit.clone();
        }
        if self.memo.len() >= MEMO_LIMIT {
            self.memo.clear();
        }
        let hex: Option<Arc<str>> = ImageKey::parse(spec).digest_hex().map(Arc::from);
        self.memo.insert(spec.to_string(), hex.clone());
        hex
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::node_annotations;
    use serde_json::json;

    const A: &str = "quay.io/x/ocb-image@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "quay.io/x/ocb-image@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn node(name: &str, desired: Option<&str>, current: Option<&str>) -> NodeMeta {
        let mut ann = serde_json::Map::new();
        if let Some(d) = desired {
            ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
        }
        if let Some(c) = current {
            ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
        }
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": ann}}))
            .expect("node")
    }

    fn names(v: BTreeSet<Arc<str>>) -> Vec<String> {
        v.into_iter().map(|n| n.to_string()).collect()
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
        idx.upsert(&node("rolling", Some(A), Some(B)));
        idx.upsert(&node("settled", Some(A), Some(A)));
        idx.upsert(&node("respelled", Some(A), Some(&A.replace("@", ":t@"))));
        idx.upsert(&node("plain", None, None));
        // A current image spelled otherwise has not reached the desired one (MCO compares
        // strings): the daemon rebases, and pulls, again.
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["respelled", "rolling"]
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
        idx.upsert(&node("n", Some(A), None));
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["n"]
        );
        idx.upsert(&node("n", Some(A), Some(A)));
        assert!(
            idx.candidates(&digests(&[A]), PolicyMode::InFlight)
                .is_empty()
        );
        idx.upsert(&node("n", Some(B), Some(A)));
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
        idx.upsert(&node("odd", Some("Not A Ref"), None));
        assert_eq!(
            names(idx.candidates(&digests(&[A]), PolicyMode::InFlight)),
            ["odd"]
        );
        assert_eq!(
            names(idx.candidates(&BTreeSet::new(), PolicyMode::InFlight)),
            ["odd"]
        );
    }

    #[test]
    fn unreached_holds_every_node_short_of_its_desired_image_once() {
        let mut idx = NodeIndex::default();
        idx.upsert(&node("rolling", Some(A), Some(B)));
        idx.upsert(&node("first", Some(A), None));
        idx.upsert(&node("settled", Some(A), Some(A)));
        idx.upsert(&node("odd", Some(A), Some("Not A Ref")));
        idx.upsert(&node("odder", Some("Not A Ref"), None));
        let unreached: Vec<&str> = idx.unreached().into_iter().map(|n| n.as_ref()).collect();
        assert_eq!(unreached, ["first", "odd", "odder", "rolling"]);
    }

    /// The index must never hide a blocking node: for every target and mode, the verdict
    /// over the index's candidates equals the verdict over all nodes.
    #[test]
    fn verdicts_from_candidates_equal_verdicts_from_all_nodes() {
        use crate::core::policy::{Deletion, evaluate, guarded_digests};
        use crate::core::snapshot::Snapshot;
        use std::sync::Arc;

        let a_hex = &A[A.len() - 64..];
        let spellings = [
            A.to_string(),
            A.replace('@', ":worker-1@"),
            format!("quay.io/x/ocb-image@sha256:{}", a_hex.to_uppercase()),
            format!("  {A} "),
            B.to_string(),
            "Not A Ref".to_string(),
            "quay.io/x/ocb-image:latest".to_string(),
        ];
        let mut nodes = Vec::new();
        for (i, d) in spellings.iter().enumerate() {
            for (j, c) in spellings.iter().enumerate() {
                nodes.push(node(&format!("n{i}-{j}"), Some(d), Some(c)));
            }
            nodes.push(node(&format!("n{i}-none"), Some(d), None));
            nodes.push(node(&format!("none-{i}"), None, Some(d)));
        }
        let mosc = |name: &str,
                    current: Option<&str>,
                    built: bool|
         -> Arc<crate::core::model::MachineOSConfig> {
            let mut v = json!({
                "metadata": {"name": name},
                "spec": {"renderedImagePushSpec": "quay.io/x/ocb-image:latest"},
                "status": {"currentImagePullSpec": current}
            });
            if built {
                v["metadata"]["annotations"] =
                    json!({"machineconfiguration.openshift.io/current-machine-os-build": "gone"});
            }
            Arc::new(serde_json::from_value(v).expect("mosc"))
        };
        let mosb = |name: &str, image: &str| -> Arc<crate::core::model::MachineOSBuild> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {crate::core::model::LABEL_MACHINE_OS_CONFIG: "with-builds"}},
                    "status": {"digestedImagePushSpec": image}
                }))
                .expect("mosb"),
            )
        };
        let snapshot = Snapshot {
            machine_os_configs: vec![
                mosc("with-builds", Some(A), false),
                mosc("builds-gone", None, true),
                mosc("tag-only", Some("quay.io/x/ocb-image:latest"), false),
            ],
            machine_os_builds: vec![mosb("b-a", A), mosb("b-b", B)],
            pools: vec![],
            nodes: nodes.iter().cloned().map(Arc::new).collect(),
            ..Default::default()
        };
        let mut idx = NodeIndex::default();
        nodes.iter().for_each(|n| idx.upsert(n));
        let by_name: HashMap<String, Arc<NodeMeta>> = snapshot
            .nodes
            .iter()
            .map(|n| (n.name().to_string(), Arc::clone(n)))
            .collect();
        let targets: Vec<Deletion<'_>> = snapshot
            .machine_os_configs
            .iter()
            .map(|m| Deletion::MachineOSConfig(m))
            .chain(
                snapshot
                    .machine_os_builds
                    .iter()
                    .map(|b| Deletion::MachineOSBuild(b)),
            )
            .collect();
        for target in targets {
            for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
                let full = evaluate(&snapshot, target, mode);
                let narrowed = match guarded_digests(&snapshot, target) {
                    Some(d) => Snapshot {
                        nodes: idx
                            .candidates(&d, mode)
                            .iter()
                            .map(|n| Arc::clone(&by_name[n.as_ref()]))
                            .collect(),
                        ..snapshot.clone()
                    },
                    None => snapshot.clone(),
                };
                let indexed = evaluate(&narrowed, target, mode);
                assert_eq!(full, indexed, "{target:?} {mode}");
                assert!(
                    !full.blocking.is_empty()
                        || full.images.is_empty()
                        || mode == PolicyMode::InFlight,
                    "fixture exercises blocking: {target:?}"
                );
            }
        }
    }
}
