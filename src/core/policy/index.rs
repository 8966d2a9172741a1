//! The node rule's fast path: [`NodeIndex`] files nodes by the digests [`super::scan`] compares,
//! and the decision over the candidates it names equals [`evaluate`]'s over every node (property
//! tests in `tests/index.rs` and `tests/reliability/properties`). The index only narrows: a node
//! stays a candidate unless it certainly cannot match, and one without a parseable digest always
//! is. [`guarded_digests`] is `None` when only every node can tell (a pool rolling out a guarded
//! image, [`super::pools`]); [`evaluate_indexed`] then tries [`blocking_digests`]' candidates
//! first, since a node that blocks by itself decides a denial ([`evaluate_blocked`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::core::image::ImageKey;
use crate::core::node::{NodeImages, NodeMeta};
use crate::core::snapshot::Snapshot;

use super::decide::{evaluate, verdict};
use super::images::guarded_images;
use super::pools::{self, Membership};
use super::verdict::{Deletion, PolicyMode, RollingPool, Verdict};
use super::{joining, scan};

/// The digests (lower-case hex) that a node's desired or current image must carry for the
/// node to matter to this deletion; `None` when only a scan of every node is safe (a guarded
/// image without a digest, or a pool rolling out a guarded image). Lets a caller with an index
/// hand [`evaluate`] only the candidate nodes. Reads builds, configs and pools, never nodes.
pub fn guarded_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    let guarded = guarded_images(snapshot, target);
    // A pool with a guarded target image blocks while any node of it has not reached the
    // image, and such a node need not carry a guarded digest at all (not targeted yet): only
    // every node can tell.
    if !pools::rolling_targets(snapshot, target, &guarded).is_empty() {
        return None;
    }
    guarded.digests()
}

/// The digests a node's images must carry for the node to block by itself (the node rule,
/// without the pool rule), or `None` when only a scan of every node can find such nodes.
/// Candidates the index names for them feed [`evaluate_blocked`].
pub fn blocking_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    guarded_images(snapshot, target).digests()
}

/// The verdict when a node among `snapshot.nodes` blocks by itself (or a joining machine does,
/// which needs no node), `None` otherwise. The nodes
/// may be only candidates, a superset of the nodes that block by themselves (as the digest index
/// names for [`blocking_digests`]): a deletion such a node blocks is refused whatever the pool
/// rule adds, so the full scan that rule needs would change only the report. The blocking nodes
/// are exactly [`evaluate`]'s; the pools are those of its pools that have a candidate not on
/// the image, reported without a count (`pending_nodes: None`, no `next_nodes`).
pub fn evaluate_blocked(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
) -> Option<Verdict> {
    let guarded = guarded_images(snapshot, target);
    let members = Membership::new(&snapshot.pools);
    let blocking = scan::blocking_nodes(snapshot, &guarded, mode, &members);
    let joining = joining::joining_machines(snapshot, target, &guarded);
    if blocking.is_empty() && joining.is_empty() {
        return None;
    }
    let rolling = pools::rolling_pools(snapshot, target, &guarded, &members)
        .into_iter()
        .map(|p| RollingPool {
            pending_nodes: None,
            next_nodes: Vec::new(),
            ..p
        })
        .collect();
    Some(verdict(
        snapshot, target, mode, &guarded, blocking, rolling, joining,
    ))
}

/// [`evaluate`] over nodes an index supplies: `nodes(Some(digests))` must return a superset of
/// the nodes carrying those digests (candidates), `nodes(None)` every node. The candidates of
/// [`guarded_digests`] decide alone; when the pool rule needs every node, the candidates of
/// [`blocking_digests`] are tried first and decide a denial by a node ([`evaluate_blocked`]).
/// What the webhook's cache uses, and the decision benchmark with it.
pub fn evaluate_indexed(
    objects: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
    nodes: impl Fn(Option<&BTreeSet<String>>) -> Vec<Arc<NodeMeta>>,
) -> Verdict {
    let mut snapshot = objects.clone();
    let digests = guarded_digests(objects, target);
    if digests.is_none()
        && let Some(blocking) = blocking_digests(objects, target)
    {
        snapshot.nodes = nodes(Some(&blocking));
        if let Some(denied) = evaluate_blocked(&snapshot, target, mode) {
            return denied;
        }
    }
    snapshot.nodes = nodes(digests.as_ref());
    evaluate(&snapshot, target, mode)
}

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
        for (map, digest) in [
            (&mut self.in_flight, &filed.in_flight),
            (&mut self.running, &filed.running),
        ] {
            if let Some(d) = digest {
                map.entry(Arc::clone(d))
                    .or_default()
                    .insert(Arc::clone(&name));
            }
        }
        if filed.unindexed {
            self.unindexed.insert(Arc::clone(&name));
        }
        if filed != Filed::default() {
            self.filed.insert(name, filed);
        }
    }

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
