//! The deletion policy: a pure function from a snapshot to a verdict with reasons.
//!
//! The danger (see docs/design.md) is a node that still has to pull an image built from
//! the object being deleted: MCO 4.20 deletes those images from the registry as soon as
//! the MachineOSConfig is gone, and the node then degrades with "manifest unknown".
//! A node that already *runs* the image does not need the registry any more, so by
//! default (`in-flight`) only nodes whose desired image is not yet reached block.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::image::{ImageKey, RepoKey, repo_of, same_image};
use crate::model::{
    MachineConfigPool, MachineOSBuild, MachineOSConfig, NodeImages, NodeMeta, override_reason,
};
use crate::selector;
use crate::snapshot::Snapshot;

/// How strictly "a node still needs the image" is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// Block while a node's desired image is one of the images and not yet reached.
    #[default]
    InFlight,
    /// Also block while a node runs one of the images (a settled pool then can never
    /// leave image mode without the override).
    InUse,
}

impl fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyMode::InFlight => "in-flight",
            PolicyMode::InUse => "in-use",
        })
    }
}

/// Kinds of object the guard protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TargetKind {
    MachineOSConfig,
    MachineOSBuild,
}

impl TargetKind {
    /// Lower-case kind as `oc` spells it in commands.
    pub fn cli_name(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfig",
            TargetKind::MachineOSBuild => "machineosbuild",
        }
    }

    /// The API kind.
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "MachineOSConfig",
            TargetKind::MachineOSBuild => "MachineOSBuild",
        }
    }

    /// Bounded label value for metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfigs",
            TargetKind::MachineOSBuild => "machineosbuilds",
        }
    }
}

/// The object whose deletion is being decided.
#[derive(Clone, Copy, Debug)]
pub enum Deletion<'a> {
    MachineOSConfig(&'a MachineOSConfig),
    MachineOSBuild(&'a MachineOSBuild),
}

/// An image the deletion would remove from the registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardedImage {
    pub image: String,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
}

/// Why a node blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockReason {
    /// Desired image is one of the guarded images and the node has not reached it.
    InFlight,
    /// The node runs one of the guarded images (`in-use` mode only).
    InUse,
}

/// A node that still needs one of the guarded images.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingNode {
    pub node: String,
    pub pool: Option<String>,
    pub current_image: Option<String>,
    pub desired_image: Option<String>,
    pub state: Option<String>,
    /// The guarded image this node matched.
    pub image: String,
    /// The build that produced it, when known.
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
    #[serde(skip)]
    pub reason: BlockReason,
}

/// A pool MCO has not finished rolling out to one of the guarded images: not paused, its
/// MachineOSConfig's current image is guarded, and a node of it does not run that image yet.
/// MCO sends those nodes to the image one after another; between two of them (or before the
/// first, while the pool's status still reads `Updated`) no node may need the image at that
/// instant, but deleting it then degrades the pool just the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingPool {
    pub pool: String,
    /// The guarded image the pool is rolling out (its MachineOSConfig's current image).
    pub image: String,
    /// Nodes of the pool that do not run the image yet, counted from the nodes themselves;
    /// `None` when the verdict was decided from the index's candidates (see
    /// [`evaluate_blocked`]), where at least one of them is known not to.
    pub pending_nodes: Option<usize>,
    /// The pool's own progress report (`status.updatedMachineCount`, `status.machineCount`),
    /// which lags the nodes.
    pub updated_machines: Option<i64>,
    pub machines: Option<i64>,
}

/// The decision, with everything needed to explain it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub kind: TargetKind,
    pub name: String,
    pub mode: PolicyMode,
    pub allowed: bool,
    /// Set when the override annotation let a blocked deletion through.
    pub override_reason: Option<String>,
    pub images: Vec<GuardedImage>,
    /// Set when the config's builds are gone and its whole repository is guarded.
    pub repository_fallback: Option<String>,
    /// Sorted by node name.
    pub blocking: Vec<BlockingNode>,
    /// Pools not done rolling out one of the images, sorted by name.
    pub rolling: Vec<RollingPool>,
}

impl Verdict {
    /// Whether anything blocks the deletion (the override aside).
    pub fn blocked(&self) -> bool {
        !self.blocking.is_empty() || !self.rolling.is_empty()
    }

    pub fn overridden(&self) -> bool {
        self.override_reason.is_some() && self.blocked()
    }
}

/// Decides whether `target` may be deleted given the rest of the cluster in `snapshot`.
pub fn evaluate(snapshot: &Snapshot, target: Deletion<'_>, mode: PolicyMode) -> Verdict {
    let (kind, meta, guard) = guard_for(snapshot, target);
    let blocking = blocking_nodes(snapshot, &guard, mode);
    let rolling = rolling_pools(snapshot, target, &guard);
    verdict(kind, meta, mode, &guard, blocking, rolling)
}

/// The digests a node's images must carry for the node to block by itself (the node rule,
/// without the pool rule), or `None` when only a scan of every node can find such nodes.
/// Candidates an index names for them feed [`evaluate_blocked`].
pub fn blocking_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    let (_, _, guard) = guard_for(snapshot, target);
    if guard.fallback.is_some() {
        return None;
    }
    guard.digests()
}

/// The verdict when a node among `snapshot.nodes` blocks by itself, `None` otherwise. The nodes
/// may be only candidates, a superset of the nodes that block by themselves (as the digest index
/// names for [`blocking_digests`]): a deletion such a node blocks is refused whatever the pool
/// rule adds, so the full scan that rule needs would change only the report. The blocking nodes
/// are exactly [`evaluate`]'s; the pools are those of its pools that have a candidate not on
/// the image, reported without a count (`pending_nodes: None`).
pub fn evaluate_blocked(
    snapshot: &Snapshot,
    target: Deletion<'_>,
    mode: PolicyMode,
) -> Option<Verdict> {
    let (kind, meta, guard) = guard_for(snapshot, target);
    let blocking = blocking_nodes(snapshot, &guard, mode);
    if blocking.is_empty() {
        return None;
    }
    let rolling = rolling_pools(snapshot, target, &guard)
        .into_iter()
        .map(|p| RollingPool {
            pending_nodes: None,
            ..p
        })
        .collect();
    Some(verdict(kind, meta, mode, &guard, blocking, rolling))
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

fn verdict(
    kind: TargetKind,
    meta: &ObjectMeta,
    mode: PolicyMode,
    guard: &Guard,
    blocking: Vec<BlockingNode>,
    rolling: Vec<RollingPool>,
) -> Verdict {
    let override_reason = override_reason(meta).map(str::to_string);
    Verdict {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        mode,
        allowed: (blocking.is_empty() && rolling.is_empty()) || override_reason.is_some(),
        override_reason,
        images: guard.listed(),
        repository_fallback: guard.fallback.as_ref().map(ToString::to_string),
        blocking,
        rolling,
    }
}

/// The digests (lower-case hex) that a node's desired or current image must carry for the
/// node to matter to this deletion; `None` when only a scan of every node is safe (the
/// repository fallback, or a guarded image without a digest). Lets a caller with an index
/// hand [`evaluate`] only the candidate nodes. Reads builds and the target, never nodes.
pub fn guarded_digests(snapshot: &Snapshot, target: Deletion<'_>) -> Option<BTreeSet<String>> {
    let (_, _, guard) = guard_for(snapshot, target);
    if guard.fallback.is_some() {
        return None;
    }
    // A pool with a guarded target image blocks while any node of it has not reached the
    // image, and such a node need not carry a guarded digest at all (not targeted yet): only
    // every node can tell.
    if !rolling_targets(snapshot, target, &guard).is_empty() {
        return None;
    }
    guard.digests()
}

fn guard_for<'a>(snapshot: &Snapshot, target: Deletion<'a>) -> (TargetKind, &'a ObjectMeta, Guard) {
    match target {
        Deletion::MachineOSConfig(mosc) => (
            TargetKind::MachineOSConfig,
            &mosc.metadata,
            images_of_config(snapshot, mosc),
        ),
        Deletion::MachineOSBuild(mosb) => (
            TargetKind::MachineOSBuild,
            &mosb.metadata,
            images_of_build(mosb),
        ),
    }
}

/// The images a deletion would remove, and how to recognise them on nodes.
struct Guard {
    exact: HashMap<ImageKey, GuardedImage>,
    fallback: Option<RepoKey>,
}

impl Guard {
    /// Digest hex of every exact image, or `None` if one has no digest.
    fn digests<C: FromIterator<String>>(&self) -> Option<C> {
        self.exact
            .keys()
            .map(|k| k.digest_hex().map(str::to_string))
            .collect()
    }

    fn listed(&self) -> Vec<GuardedImage> {
        let mut images: Vec<_> = self.exact.values().cloned().collect();
        images.sort_by(|a, b| a.image.cmp(&b.image));
        images
    }

    fn add(&mut self, spec: &str, build: Option<&str>) {
        if spec.trim().is_empty() {
            return;
        }
        let entry = self
            .exact
            .entry(ImageKey::parse(spec))
            .or_insert_with(|| GuardedImage {
                image: spec.trim().to_string(),
                machine_os_build: None,
            });
        if entry.machine_os_build.is_none() {
            entry.machine_os_build = build.map(str::to_string);
        }
    }

    /// The guarded image a node's pull spec refers to, if any. Nodes almost always carry
    /// the exact text the build recorded, so that is tried before parsing.
    fn find(&self, spec: &str, prefilter: &Prefilter) -> Option<GuardedImage> {
        if !prefilter.may_match(spec) {
            return None;
        }
        let spec = spec.trim();
        if let Some(hit) = self.exact.values().find(|g| g.image == spec) {
            return Some(hit.clone());
        }
        let key = ImageKey::parse(spec);
        if let Some(hit) = self.exact.get(&key) {
            return Some(hit.clone());
        }
        let repo = self.fallback.as_ref()?;
        (key.repo() == Some(repo)).then(|| GuardedImage {
            image: spec.trim().to_string(),
            machine_os_build: None,
        })
    }
}

/// Images of a MachineOSConfig: every build's digested image, the config's current
/// image, and, once its builds are gone, anything in its rendered-image repository.
fn images_of_config(snapshot: &Snapshot, mosc: &MachineOSConfig) -> Guard {
    let mut guard = Guard {
        exact: HashMap::new(),
        fallback: None,
    };
    let mut builds = 0;
    for mosb in snapshot
        .machine_os_builds
        .iter()
        .filter(|b| b.belongs_to(mosc.name()))
    {
        builds += 1;
        if let Some(spec) = &mosb.status.digested_image_push_spec {
            guard.add(spec, Some(mosb.name()));
        }
    }
    if let Some(spec) = &mosc.status.current_image_pull_spec {
        guard.add(spec, mosc.current_build_name());
    }
    // A config with no builds left but evidence that it built (a current image or build
    // name) may have images on nodes that no build lists any more; a config that never
    // built has no images at all, so it guards nothing rather than its whole repository.
    let has_built =
        mosc.status.current_image_pull_spec.is_some() || mosc.current_build_name().is_some();
    if builds == 0 && has_built {
        guard.fallback = mosc
            .spec
            .rendered_image_push_spec
            .as_deref()
            .and_then(repo_of);
    }
    guard
}

fn images_of_build(mosb: &MachineOSBuild) -> Guard {
    let mut guard = Guard {
        exact: HashMap::new(),
        fallback: None,
    };
    if let Some(spec) = &mosb.status.digested_image_push_spec {
        guard.add(spec, Some(mosb.name()));
    }
    guard
}

/// Cheap test run before full parsing, so a decision over 50,000 nodes parses only the
/// few pull specs that can match. It never rejects a spec the full comparison accepts:
/// a digest is always the last part of a reference, and a repository's last path
/// element always appears literally in any spelling of it.
enum Prefilter {
    /// Lower-case digest hex strings of the guarded images.
    DigestSuffix(Vec<String>),
    /// Digest suffixes, plus any spec containing this repository name.
    WithRepo(Vec<String>, String),
    /// Nothing cheap applies (tag-only or unparseable guarded images): parse everything.
    None,
}

impl Prefilter {
    fn for_guard(guard: &Guard) -> Prefilter {
        match (guard.digests::<Vec<String>>(), &guard.fallback) {
            (None, _) => Prefilter::None,
            (Some(h), None) => Prefilter::DigestSuffix(h),
            (Some(h), Some(repo)) => {
                let last = repo.repository.rsplit('/').next().unwrap_or_default();
                Prefilter::WithRepo(h, last.to_string())
            }
        }
    }

    fn may_match(&self, spec: &str) -> bool {
        let any_digest = |hexes: &[String]| hexes.iter().any(|hex| ends_with_digest(spec, hex));
        match self {
            Prefilter::DigestSuffix(h) => any_digest(h),
            Prefilter::WithRepo(h, name) => any_digest(h) || spec.contains(name.as_str()),
            Prefilter::None => true,
        }
    }
}

fn blocking_nodes(snapshot: &Snapshot, guard: &Guard, mode: PolicyMode) -> Vec<BlockingNode> {
    if guard.exact.is_empty() && guard.fallback.is_none() {
        return Vec::new();
    }
    let prefilter = Prefilter::for_guard(guard);
    let mut memo = Memo::default();
    let mut blocking = Vec::new();
    for node in &snapshot.nodes {
        let images = NodeImages::of(node);
        let key = (StrId::of(images.desired), StrId::of(images.current));
        let hit = memo.get_or(key, || classify(images, guard, &prefilter, mode));
        if let Some((image, reason)) = hit {
            let mut blocked = blocking_node(node, images, image, reason);
            blocked.pool = pool_of(node, &snapshot.pools).map(str::to_string);
            blocking.push(blocked);
        }
    }
    blocking.sort_by(|a, b| a.node.cmp(&b.node));
    blocking
}

/// Whether a node with these images blocks, and on which guarded image.
fn classify(
    images: NodeImages<'_>,
    guard: &Guard,
    prefilter: &Prefilter,
    mode: PolicyMode,
) -> Option<(GuardedImage, BlockReason)> {
    let NodeImages {
        desired, current, ..
    } = images;
    let in_flight = desired.and_then(|d| {
        let hit = guard.find(d, prefilter)?;
        let reached = current.is_some_and(|c| same_image(c, d));
        (!reached).then_some((hit, BlockReason::InFlight))
    });
    in_flight.or_else(|| match mode {
        PolicyMode::InUse => current
            .and_then(|c| guard.find(c, prefilter))
            .map(|hit| (hit, BlockReason::InUse)),
        PolicyMode::InFlight => None,
    })
}

fn blocking_node(
    node: &NodeMeta,
    images: NodeImages<'_>,
    image: GuardedImage,
    reason: BlockReason,
) -> BlockingNode {
    let NodeImages {
        desired,
        current,
        state,
    } = images;
    BlockingNode {
        node: node.name().to_string(),
        pool: None,
        current_image: current.map(str::to_string),
        desired_image: desired.map(str::to_string),
        state: state.map(str::to_string),
        image: image.image,
        machine_os_build: image.machine_os_build,
        reason,
    }
}

/// Identity of a string slice by address and length. The node cache interns image
/// references, so nodes on the same image share one allocation: keyed by identity, a scan
/// compares and parses each distinct reference once instead of once per node. Sound while
/// the strings are borrowed, as all nodes are for the length of a decision.
#[derive(Clone, Copy, PartialEq, Eq)]
struct StrId(usize, usize);

impl StrId {
    fn of(s: Option<&str>) -> StrId {
        s.map_or(StrId(0, 0), |s| StrId(s.as_ptr() as usize, s.len()))
    }
}

/// A few recent results by key: enough for the handful of distinct images a cluster runs,
/// bounded so that nodes that share nothing (a directory dump) cost a short search each.
struct Memo<K, V> {
    entries: Vec<(K, V)>,
    next: usize,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            entries: Vec::new(),
            next: 0,
        }
    }
}

impl<K: PartialEq + Copy, V: Clone> Memo<K, V> {
    const CAPACITY: usize = 8;

    fn get_or(&mut self, key: K, compute: impl FnOnce() -> V) -> V {
        if let Some((_, v)) = self.entries.iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
        let value = compute();
        if self.entries.len() < Self::CAPACITY {
            self.entries.push((key, value.clone()));
        } else {
            self.entries[self.next] = (key, value.clone());
            self.next = (self.next + 1) % Self::CAPACITY;
        }
        value
    }
}

/// Pools MCO has not finished rolling out (see [`RollingPool`]) to a guarded image.
fn rolling_pools(snapshot: &Snapshot, target: Deletion<'_>, guard: &Guard) -> Vec<RollingPool> {
    let mut rolling: Vec<RollingPool> = rolling_targets(snapshot, target, guard)
        .into_iter()
        // Only a node of the pool that has not reached the image makes MCO target it again;
        // 4.20 reports `Updating` also while a new build runs or after one failed, with every
        // node on this image, and still `Updated` for a moment after the config points at a
        // new image, so the pool's status decides nothing here.
        .filter_map(|(pool, current, image)| {
            let pending_nodes = pending_nodes(snapshot, pool, &current);
            (pending_nodes > 0).then(|| RollingPool {
                pool: pool.name().to_string(),
                image: image.image,
                pending_nodes: Some(pending_nodes),
                updated_machines: pool.status.updated_machine_count,
                machines: pool.status.machine_count,
            })
        })
        .collect();
    rolling.sort_by(|a, b| a.pool.cmp(&b.pool));
    rolling
}

/// Pools not paused whose MachineOSConfig's current image is guarded: each with that image as
/// the config spells it and as the guard lists it. The MachineOSConfig being deleted is taken
/// from the request, the others from the snapshot. Reads no node.
fn rolling_targets<'s>(
    snapshot: &'s Snapshot,
    target: Deletion<'_>,
    guard: &Guard,
) -> Vec<(&'s MachineConfigPool, String, GuardedImage)> {
    if guard.exact.is_empty() && guard.fallback.is_none() {
        return Vec::new();
    }
    let prefilter = Prefilter::for_guard(guard);
    let target_config = match target {
        Deletion::MachineOSConfig(m) => Some(m),
        Deletion::MachineOSBuild(_) => None,
    };
    let config_of = |pool: &str| {
        target_config.filter(|m| m.pool_name() == pool).or_else(|| {
            snapshot
                .machine_os_configs
                .iter()
                .map(Arc::as_ref)
                .find(|m| m.pool_name() == pool)
        })
    };
    snapshot
        .pools
        .iter()
        .filter(|p| !p.is_paused())
        .filter_map(|p| {
            let current = config_of(p.name())?
                .status
                .current_image_pull_spec
                .as_deref()?;
            let image = guard.find(current, &prefilter)?;
            Some((p.as_ref(), current.to_string(), image))
        })
        .collect()
}

/// Nodes of `pool` that do not run `image` yet. It needs every node: which is why
/// [`guarded_digests`] sends a decision with such a pool to a full scan, and why the cheap
/// tests (the image text, then the pool's own selector) run before the full ones.
fn pending_nodes(snapshot: &Snapshot, pool: &MachineConfigPool, image: &str) -> usize {
    let Some(selector) = pool.spec.node_selector.as_ref() else {
        return 0;
    };
    let image = SameImage::new(image);
    let mut reached = Memo::default();
    let mut pending = 0;
    for node in &snapshot.nodes {
        let current = NodeImages::of(node).current;
        let on_image = reached.get_or(StrId::of(current), || current.is_some_and(|c| image.is(c)));
        if !on_image
            && selector::matches(selector, node.as_ref())
            && pool_of(node, &snapshot.pools) == Some(pool.name())
        {
            pending += 1;
        }
    }
    pending
}

/// [`same_image`] against one fixed image, for many candidates: equal text first, then a
/// digest suffix test, and only then a parse.
struct SameImage<'a> {
    text: &'a str,
    key: ImageKey,
    hex: Option<String>,
}

impl<'a> SameImage<'a> {
    fn new(image: &'a str) -> Self {
        let key = ImageKey::parse(image);
        let hex = key.digest_hex().map(str::to_string);
        SameImage {
            text: image.trim(),
            key,
            hex,
        }
    }

    fn is(&self, spec: &str) -> bool {
        let spec = spec.trim();
        spec == self.text
            || (self
                .hex
                .as_deref()
                .is_none_or(|h| ends_with_digest(spec, h))
                && ImageKey::parse(spec) == self.key)
    }
}

/// Whether `spec` ends with the digest hex `hex`, in any case: a digest is always the last
/// part of a reference, so no spelling of an image with that digest fails this.
fn ends_with_digest(spec: &str, hex: &str) -> bool {
    let spec = spec.trim_end().as_bytes();
    spec.len() >= hex.len() && spec[spec.len() - hex.len()..].eq_ignore_ascii_case(hex.as_bytes())
}

/// The pool a node belongs to: the one whose selector matches it; a custom pool wins
/// over `worker` (MCO's rule), and ties go to the first name alphabetically.
fn pool_of<'p>(node: &NodeMeta, pools: &'p [Arc<MachineConfigPool>]) -> Option<&'p str> {
    pools
        .iter()
        .filter(|p| {
            p.spec
                .node_selector
                .as_ref()
                .is_some_and(|s| selector::matches(s, node))
        })
        .map(|p| p.name())
        .min_by_key(|name| (*name == "worker", *name))
}

#[cfg(test)]
mod tests;
