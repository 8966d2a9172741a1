//! Property tests (proptest) of guarantees no table of hand-written cases can cover:
//!
//! - `indexed_verdict_equals_full_scan`: on random snapshots (nodes in every spelling of a few
//!   images, configs, builds, pools, an index fed with stale and vanished nodes first), the
//!   webhook's cached decision (`Reviewer::cached`: `guarded_digests`, the digest index's
//!   candidates, then `evaluate`, or `evaluate_blocked` on candidates when a node blocks)
//!   equals `evaluate` over every node, in both policies (a denial from candidates may name
//!   fewer pools, uncounted).
//! - `admission_reviews_never_panic`: arbitrary bytes and well-formed AdmissionReviews mutated at
//!   random (JSON values replaced, keys dropped, bytes flipped, inserted, cut) go through
//!   `admission::decode`, `classify` and the whole `Reviewer::review` without a panic; the
//!   response carries the request's uid, and a guarded deletion whose object does not decode is
//!   never allowed.
//! - `directory_files_never_panic`: arbitrary and mutated YAML/JSON files (objects, lists,
//!   multi-document streams) go through `dump::load_dir`, then `evaluate` and the denial text of
//!   every target found, without a panic or an error.
//! - `image_identity_laws`: `same_image` is reflexive and symmetric on any text, ignores the tag
//!   once a digest is present, ignores the case of the digest hex and surrounding whitespace,
//!   tells different digests and repositories apart, and agrees with the digest the index files
//!   nodes under.
//!
//! Case counts: short by default (a few seconds under `make test`). `MOSC_GUARD_CASES_VERDICT`,
//! `MOSC_GUARD_CASES_DECODE` (admission and directory files) and `MOSC_GUARD_CASES_IMAGE`, else
//! `PROPTEST_CASES`, set them (not `PROPTEST_*` names: proptest warns about those it does not
//! know); `make soak` runs 100,000 verdict and 1,000,000 decode cases. Each test prints
//! `property <name>: <n> cases passed`. A failure prints the shrunk input.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use mosc_guard::core::finalizer;
use mosc_guard::core::image::{ImageKey, same_image};
use mosc_guard::core::message;
use mosc_guard::core::model::{
    GROUP, LABEL_MACHINE_OS_CONFIG, LABEL_TARGET_POOL, MachineConfigPool, MachineOSBuild,
    MachineOSConfig, OVERRIDE_ANNOTATION, node_annotations,
};
use mosc_guard::core::node::NodeMeta;
use mosc_guard::core::policy::{Deletion, PolicyMode, evaluate};
use mosc_guard::core::snapshot::Snapshot;
use mosc_guard::sources::dump;
use mosc_guard::sources::node_index::NodeIndex;
use mosc_guard::sources::view::{ClusterView, Fresh, FreshNodes, StaticView};
use mosc_guard::telemetry::metrics::Metrics;
use mosc_guard::webhook::admission::{self, Classified};
use mosc_guard::webhook::review::Reviewer;

// ---------------------------------------------------------------------------------------------
// Running a property with a configurable number of cases.

/// Cases for one property: `var`, else `PROPTEST_CASES`, else `short`.
fn cases(var: &str, short: u32) -> u32 {
    let value = std::env::var(var).ok().map(|v| (var, v)).or_else(|| {
        std::env::var("PROPTEST_CASES")
            .ok()
            .map(|v| ("PROPTEST_CASES", v))
    });
    match value {
        None => short,
        Some((name, v)) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a case count: {e}")),
    }
}

/// Runs `test` on `cases` values of `strategy`; panics with the shrunk failing input.
fn check<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = Config {
        cases,
        // Inputs are printed on failure; persisting them needs the macro's source location.
        failure_persistence: None,
        ..Config::default()
    };
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("property {name} failed: {e}");
    }
    println!(
        "property {name}: {cases} cases passed in {:.1?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// A small universe of images, spelled every way the guard must recognise (and some it must not).

/// Repositories; `ubuntu` and `docker.io/library/ubuntu` are the same one.
const REPOS: &[&str] = &[
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image",
    "quay.io/x/ocb-image",
    "quay.io/x/other",
    "ubuntu",
    "docker.io/library/ubuntu",
];
/// Digest hex values (lower case); the third differs from the second only in its last digit.
const HEXES: &[&str] = &[
    "01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
    "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed",
];
const TAGS: &[&str] = &["latest", "worker-1", "v4.20.0_x"];
/// Spellings, see [`Image::render`].
const SPELLINGS: u8 = 9;

/// One image reference in one spelling.
#[derive(Clone, Debug)]
struct Image {
    repo: usize,
    hex: usize,
    tag: usize,
    spelling: u8,
}

impl Image {
    fn render(&self) -> String {
        let (repo, hex, tag) = (REPOS[self.repo], HEXES[self.hex], TAGS[self.tag]);
        match self.spelling {
            0 | 1 => format!("{repo}@sha256:{hex}"),
            2 => format!("{repo}:{tag}@sha256:{hex}"),
            3 => format!("{repo}@sha256:{}", hex.to_ascii_uppercase()),
            4 => format!("  {repo}@sha256:{hex}\n"),
            5 => format!("{repo}:{tag}"),
            6 => format!("{repo}@sha512:{hex}{hex}"),
            7 => format!("{repo}@sha256:{}", &hex[..12]),
            _ => ["Not A Ref", "", "sha256:", "@@"][self.tag % 4].to_string(),
        }
    }

    /// The same image (repository and digest) in another spelling.
    fn respelled(&self, spelling: u8) -> Image {
        Image {
            spelling,
            ..self.clone()
        }
    }
}

fn image() -> impl Strategy<Value = Image> {
    (0..REPOS.len(), 0..HEXES.len(), 0..TAGS.len(), 0..SPELLINGS).prop_map(
        |(repo, hex, tag, spelling)| Image {
            repo,
            hex,
            tag,
            spelling,
        },
    )
}

fn spec() -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(0.85, image().prop_map(|i| i.render()))
}

// ---------------------------------------------------------------------------------------------
// Random snapshots for the verdict property.

const POOLS: &[&str] = &["worker", "infra", "custom", "master"];

#[derive(Clone, Debug)]
struct NodeSpec {
    desired: Option<String>,
    current: Option<String>,
    state: Option<&'static str>,
    role: &'static str,
    /// Another role, or "windows" for the OS label.
    extra: &'static str,
}

/// A node's images: independent, or the current one the same image as the desired one
/// (literally, or in another spelling), which is how settled nodes look.
fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop::option::weighted(0.85, image()),
        prop::option::weighted(0.8, image()),
        0..4u8,
        0..SPELLINGS,
        prop::sample::select(&["Done", "Working", "Degraded", " "][..]),
        prop::sample::select(POOLS),
        // A second role (a custom pool beside worker, a compact cluster's master), or a
        // Windows node (in no pool).
        prop::sample::select(&["", "", "", "worker", "infra", "custom", "windows"][..]),
    )
        .prop_map(|(desired, other, relation, spelling, state, role, extra)| {
            let current = match (&desired, relation) {
                (Some(d), 0) => Some(d.render()),
                (Some(d), 1) => Some(d.respelled(spelling).render()),
                _ => other.map(|o| o.render()),
            };
            NodeSpec {
                desired: desired.map(|d| d.render()),
                current,
                state: Some(state),
                role,
                extra,
            }
        })
}

fn node(name: &str, spec: &NodeSpec) -> NodeMeta {
    let mut annotations = serde_json::Map::new();
    if let Some(d) = &spec.desired {
        annotations.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = &spec.current {
        annotations.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    if let Some(s) = spec.state {
        annotations.insert(node_annotations::STATE.into(), json!(s));
    }
    let mut labels = serde_json::Map::new();
    labels.insert(format!("node-role.kubernetes.io/{}", spec.role), json!(""));
    let os = match spec.extra {
        "windows" => "windows",
        "" => "linux",
        role => {
            labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
            "linux"
        }
    };
    labels.insert("kubernetes.io/os".into(), json!(os));
    serde_json::from_value(json!({"metadata": {
        "name": name,
        "labels": labels,
        "annotations": annotations,
    }}))
    .expect("node fixture")
}

fn config() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(POOLS),
        spec(),
        prop::option::of(prop::sample::select(
            &[
                "quay.io/x/ocb-image:latest",
                "ubuntu:latest",
                "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest",
                "Not A Ref",
            ][..],
        )),
        prop::option::of(prop::sample::select(&["b0", "gone", ""][..])),
        prop::option::weighted(0.15, prop::sample::select(&["accepted risk", "", " "][..])),
    )
        .prop_map(|(name, current, rendered, build, override_reason)| {
            let mut annotations = serde_json::Map::new();
            if let Some(b) = build {
                annotations.insert(
                    "machineconfiguration.openshift.io/current-machine-os-build".into(),
                    json!(b),
                );
            }
            if let Some(r) = override_reason {
                annotations.insert(OVERRIDE_ANNOTATION.into(), json!(r));
            }
            json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "MachineOSConfig",
                "metadata": {"name": name, "uid": format!("uid-{name}"), "annotations": annotations},
                "spec": {"machineConfigPool": {"name": name}, "renderedImagePushSpec": rendered},
                "status": {"currentImagePullSpec": current}
            })
        })
}

fn build() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["worker", "infra", "custom", "nobody"][..]),
        // Labels as MCO writes them (both), only the config's, or none (spec only).
        prop::sample::select(&[2u8, 2, 2, 2, 2, 1, 0][..]),
        // A controller reference to its config, to a recreated config of the same name, a
        // plain owner reference, or none (an orphan).
        prop::sample::select(
            &[
                "controller",
                "controller",
                "controller",
                "controller",
                "recreated",
                "owner",
                "none",
            ][..],
        ),
        spec(),
        prop::option::weighted(0.1, prop::sample::select(&["accepted risk", ""][..])),
    )
        .prop_map(|(config, labels, owner, image, override_reason)| {
            let mut v = json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "MachineOSBuild",
                "metadata": {},
                "spec": {"machineOSConfig": {"name": config}},
                "status": {"digestedImagePushSpec": image}
            });
            v["metadata"]["labels"] = match labels {
                2 => json!({LABEL_MACHINE_OS_CONFIG: config, LABEL_TARGET_POOL: config}),
                1 => json!({LABEL_MACHINE_OS_CONFIG: config}),
                _ => json!({}),
            };
            let reference = |uid: String, controller: bool| {
                json!([{"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig",
                        "name": config, "uid": uid, "controller": controller}])
            };
            v["metadata"]["ownerReferences"] = match owner {
                "controller" => reference(format!("uid-{config}"), true),
                "recreated" => reference(format!("uid-{config}-old"), true),
                "owner" => reference(format!("uid-{config}"), false),
                _ => json!([]),
            };
            if let Some(r) = override_reason {
                v["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: r});
            }
            v
        })
}

fn pool() -> impl Strategy<Value = (Option<&'static str>, Option<bool>)> {
    (
        prop::option::of(prop::sample::select(&["True", "False", "true"][..])),
        prop::option::of(any::<bool>()),
    )
}

/// What to delete: a config or build of the snapshot, or a config as the request carries it
/// (its status may differ from the cache's).
#[derive(Clone, Debug)]
enum Target {
    Config(usize),
    Build(usize),
    Requested(Value),
}

#[derive(Clone, Debug)]
struct World {
    nodes: Vec<NodeSpec>,
    /// Older versions of nodes (by index), filed in the index before the current ones.
    stale: Vec<(usize, NodeSpec)>,
    /// Nodes filed in the index and removed again.
    vanished: Vec<NodeSpec>,
    configs: Vec<Value>,
    builds: Vec<Value>,
    pools: Vec<(Option<&'static str>, Option<bool>)>,
    target: Target,
    mode: PolicyMode,
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(node_spec(), 0..24),
        prop::collection::vec((0..24usize, node_spec()), 0..8),
        prop::collection::vec(node_spec(), 0..4),
        prop::collection::vec(config(), 1..4),
        prop::collection::vec(build(), 1..8),
        prop::collection::vec(pool(), POOLS.len()),
        prop_oneof![
            2 => (0..4usize).prop_map(Target::Config),
            2 => (0..8usize).prop_map(Target::Build),
            1 => config().prop_map(Target::Requested),
        ],
        prop::sample::select(&[PolicyMode::InFlight, PolicyMode::InUse][..]),
    )
        .prop_map(
            |(nodes, stale, vanished, configs, builds, pools, target, mode)| World {
                nodes,
                stale,
                vanished,
                configs,
                builds,
                pools,
                target,
                mode,
            },
        )
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes"))
}

impl World {
    /// Every object, nodes included (what a full scan reads).
    fn snapshot(&self) -> Snapshot {
        let mut builds: Vec<Arc<MachineOSBuild>> = Vec::new();
        for (i, b) in self.builds.iter().enumerate() {
            let mut b = b.clone();
            b["metadata"]["name"] = json!(format!("b{i}"));
            builds.push(parse(&b));
        }
        Snapshot {
            // One config per pool name, as MCO requires.
            machine_os_configs: self
                .configs
                .iter()
                .map(|c| (c["metadata"]["name"].to_string(), c))
                .collect::<BTreeMap<_, _>>()
                .values()
                .map(|c| parse(c))
                .collect(),
            machine_os_builds: builds,
            pools: POOLS
                .iter()
                .zip(&self.pools)
                .map(|(name, (updating, paused))| {
                    let conditions: Vec<Value> = updating
                        .iter()
                        .map(|s| json!({"type": "Updating", "status": s}))
                        .collect();
                    parse::<MachineConfigPool>(&json!({
                        "metadata": {"name": name},
                        "spec": {
                            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                            "paused": paused
                        },
                        "status": {"conditions": conditions, "machineCount": 3, "updatedMachineCount": 1}
                    }))
                })
                .collect(),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| Arc::new(node(&format!("node-{i}"), n)))
                .collect(),
        }
    }

    /// The index as the node watch leaves it: stale versions and vanished nodes first.
    fn index(&self) -> NodeIndex {
        let mut index = NodeIndex::default();
        for (i, n) in &self.stale {
            index.upsert(&node(&format!("node-{i}"), n));
        }
        for (i, n) in self.vanished.iter().enumerate() {
            index.upsert(&node(&format!("vanished-{i}"), n));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            index.upsert(&node(&format!("node-{i}"), n));
        }
        for i in 0..self.vanished.len() {
            index.remove(&format!("vanished-{i}"));
        }
        index
    }
}

/// The webhook's view over a snapshot: nodes come from the digest index by name, exactly as
/// `cache::Caches` hands them to `Reviewer::cached`.
struct IndexedView {
    objects: Snapshot,
    index: NodeIndex,
    by_name: HashMap<String, Arc<NodeMeta>>,
    all: Vec<Arc<NodeMeta>>,
}

impl ClusterView for IndexedView {
    fn objects(&self) -> Snapshot {
        self.objects.clone()
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        match digests {
            Some(d) => self
                .index
                .candidates(d, mode)
                .iter()
                .filter_map(|name| self.by_name.get(name.as_ref()).cloned())
                .collect(),
            None => self.all.clone(),
        }
    }

    /// A confirming read whose node cache passed the fence: the same objects and index.
    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, String>> {
        Box::pin(async {
            Ok(Fresh {
                objects: self.objects.clone(),
                nodes: FreshNodes::Cached,
            })
        })
    }

    fn ready(&self) -> bool {
        true
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

#[test]
fn indexed_verdict_equals_full_scan() {
    let metrics = Arc::new(Metrics::default());
    let (blocked, allowed_with_images, indexed) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let n = cases("MOSC_GUARD_CASES_VERDICT", 1000);
    check("indexed_verdict_equals_full_scan", n, world(), |w| {
        let full = w.snapshot();
        let requested: Option<Arc<MachineOSConfig>> = match &w.target {
            Target::Requested(v) => Some(parse(v)),
            _ => None,
        };
        let target = match &w.target {
            Target::Config(i) => Deletion::MachineOSConfig(
                &full.machine_os_configs[i % full.machine_os_configs.len()],
            ),
            Target::Build(i) if !full.machine_os_builds.is_empty() => {
                Deletion::MachineOSBuild(&full.machine_os_builds[i % full.machine_os_builds.len()])
            }
            _ => Deletion::MachineOSConfig(
                requested.as_deref().unwrap_or(&full.machine_os_configs[0]),
            ),
        };
        let want = evaluate(&full, target, w.mode);
        if mosc_guard::core::policy::guarded_digests(&full, target).is_some() {
            indexed.fetch_add(1, Ordering::Relaxed);
        }
        let view = IndexedView {
            objects: Snapshot {
                nodes: Vec::new(),
                ..full.clone()
            },
            index: w.index(),
            by_name: full
                .nodes
                .iter()
                .map(|n| (n.name().to_string(), Arc::clone(n)))
                .collect(),
            all: full.nodes.clone(),
        };
        let reviewer = Reviewer::new(view, w.mode, Arc::clone(&metrics), Duration::from_secs(5));
        let got = reviewer.cached(target);
        if got.blocking.is_empty() {
            prop_assert_eq!(&got, &want);
        } else {
            // A denial may be decided from the index's candidates (`evaluate_blocked`): the
            // same decision and blocking nodes; its pools are among the full scan's, uncounted.
            for p in &got.rolling {
                prop_assert!(
                    want.rolling.iter().any(|q| q.pool == p.pool
                        && q.image == p.image
                        && (p.pending_nodes.is_none() || p.pending_nodes == q.pending_nodes)),
                    "{p:?} not among {:?}",
                    want.rolling
                );
            }
            let strip = |v: &mosc_guard::core::policy::Verdict| mosc_guard::core::policy::Verdict {
                rolling: Vec::new(),
                ..v.clone()
            };
            prop_assert_eq!(strip(&got), strip(&want));
        }
        // A confirmation whose node cache passed the fence reads nodes the same way.
        let fresh = Fresh {
            objects: reviewer.view.objects(),
            nodes: FreshNodes::Cached,
        };
        let confirmed = evaluate(
            &fresh.snapshot_for(&reviewer.view, target, w.mode),
            target,
            w.mode,
        );
        prop_assert_eq!(&confirmed, &want);
        if want.blocked() {
            blocked.fetch_add(1, Ordering::Relaxed);
        } else if !want.images.is_empty() {
            allowed_with_images.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    // The generator must reach both verdicts, mostly through the index: otherwise the
    // property holds vacuously.
    let share = |c: &AtomicUsize| c.load(Ordering::Relaxed) as f64 / f64::from(n.max(1));
    println!(
        "  blocked {:.0}%, allowed with images {:.0}%, decided through the index {:.0}%",
        100.0 * share(&blocked),
        100.0 * share(&allowed_with_images),
        100.0 * share(&indexed)
    );
    assert!(share(&blocked) > 0.1, "too few blocked cases");
    assert!(share(&allowed_with_images) > 0.1, "too few allowed cases");
    assert!(share(&indexed) > 0.3, "too few cases through the index");
}

// ---------------------------------------------------------------------------------------------
// Arbitrary and mutated inputs for the decoders.

/// Keys the decoders look at, so mutations hit fields that matter.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "operation",
    "resource",
    "group",
    "version",
    "subResource",
    "name",
    "namespace",
    "object",
    "oldObject",
    "dryRun",
    "userInfo",
    "username",
    "metadata",
    "annotations",
    "labels",
    "finalizers",
    "deletionTimestamp",
    "resourceVersion",
    "spec",
    "status",
    "items",
    "machineConfigPool",
    "machineOSConfig",
    "currentImagePullSpec",
    "digestedImagePushSpec",
    "renderedImagePushSpec",
    "nodeSelector",
    "matchLabels",
    "matchExpressions",
    "conditions",
    "type",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "\\PC{0,16}",
        2 => prop::sample::select(KEYS).prop_map(str::to_string),
        2 => image().prop_map(|i| i.render()),
        1 => prop::sample::select(&[
            "DELETE", "UPDATE", "CREATE", "admission.k8s.io/v1", "AdmissionReview", GROUP,
            "machineosconfigs", "machineosbuilds", "v1", "List", "NodeList", "Node",
            "MachineOSConfig", "MachineOSBuild", "MachineConfigPool", "True", "Updating",
            finalizer::FINALIZER, OVERRIDE_ANNOTATION, "2026-11-30T00:00:00Z", "In", "NotIn",
            "Exists", "DoesNotExist",
        ][..]).prop_map(str::to_string),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A MachineOSConfig, MachineOSBuild, pool or node as the guard would see it, with random
/// finalizers, deletion, override and images.
fn k8s_object() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["MachineOSConfig", "MachineOSBuild", "MachineConfigPool", "Node"][..]),
        prop::sample::select(&["worker", "infra", "worker-b1", ""][..]),
        prop::collection::vec(
            prop::sample::select(&[finalizer::FINALIZER, "foregroundDeletion", ""][..]),
            0..3,
        ),
        any::<bool>(),
        prop::option::of(text()),
        spec(),
        spec(),
    )
        .prop_map(|(kind, name, finalizers, deleting, reason, a, b)| {
            let api_version = if kind == "Node" {
                "v1".to_string()
            } else {
                format!("{GROUP}/v1")
            };
            let mut annotations = serde_json::Map::new();
            for (key, value) in [
                (node_annotations::DESIRED_IMAGE, &a),
                (node_annotations::CURRENT_IMAGE, &b),
                (OVERRIDE_ANNOTATION, &reason),
            ] {
                if let Some(v) = value {
                    annotations.insert(key.to_string(), json!(v));
                }
            }
            let mut v = json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {
                    "name": name,
                    "uid": "8d3ac0f8-6f6e-4c31-9d7a-2b8ac3f0f6b1",
                    "resourceVersion": "1234",
                    "finalizers": finalizers,
                    "annotations": annotations,
                    "labels": {LABEL_MACHINE_OS_CONFIG: "worker", "node-role.kubernetes.io/worker": ""},
                },
                "spec": {
                    "machineConfigPool": {"name": name},
                    "machineOSConfig": {"name": "worker"},
                    "renderedImagePushSpec": "quay.io/x/ocb-image:latest",
                    "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                },
                "status": {
                    "currentImagePullSpec": a,
                    "digestedImagePushSpec": b,
                    "conditions": [{"type": "Updating", "status": "True"}],
                },
            });
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
            }
            v
        })
}

/// One of `choices`, each as often as its weight says.
fn weighted(choices: &[(usize, &'static str)]) -> impl Strategy<Value = &'static str> + use<> {
    let all: Vec<&'static str> = choices
        .iter()
        .flat_map(|(n, c)| std::iter::repeat_n(*c, *n))
        .collect();
    prop::sample::select(all)
}

fn review() -> impl Strategy<Value = Value> {
    (
        weighted(&[
            (4, "DELETE"),
            (2, "UPDATE"),
            (1, "CREATE"),
            (1, "CONNECT"),
            (1, "delete"),
        ]),
        weighted(&[
            (3, "machineosconfigs"),
            (2, "machineosbuilds"),
            (1, "machineconfigpools"),
            (1, "nodes"),
        ]),
        weighted(&[
            (4, GROUP),
            (1, ""),
            (1, "machineconfiguration.openshift.io.evil"),
        ]),
        prop::option::weighted(0.4, weighted(&[(1, ""), (1, "status"), (1, "finalizers")])),
        prop_oneof![9 => any::<bool>().prop_map(Value::from), 1 => Just(Value::Null)],
        prop::option::weighted(0.9, k8s_object()),
        prop::option::weighted(0.5, k8s_object()),
    )
        .prop_map(|(op, resource, group, sub, dry_run, old, new)| {
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "kind": {"group": group, "version": "v1", "kind": "MachineOSConfig"},
                    "resource": {"group": group, "version": "v1", "resource": resource},
                    "subResource": sub,
                    "name": "worker",
                    "operation": op,
                    "userInfo": {"username": "admin", "groups": ["system:masters"]},
                    "object": new,
                    "oldObject": old,
                    "dryRun": dry_run,
                }
            })
        })
}

/// A change at some place of a JSON value; `at` picks the place among all of them.
#[derive(Clone, Debug)]
enum Edit {
    Replace { at: usize, with: Value },
    Remove { at: usize },
    Insert { at: usize, key: String, with: Value },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), json_value()).prop_map(|(at, with)| Edit::Replace { at, with }),
        2 => any::<usize>().prop_map(|at| Edit::Remove { at }),
        1 => (any::<usize>(), text(), json_value()).prop_map(|(at, key, with)| Edit::Insert { at, key, with }),
    ]
}

/// JSON pointers to every value inside `v` (the root excluded).
fn places(v: &Value, here: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{here}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                places(child, p, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                let p = format!("{here}/{i}");
                out.push(p.clone());
                places(child, p, out);
            }
        }
        _ => {}
    }
}

fn apply(v: &mut Value, edit: &Edit) {
    let mut all = Vec::new();
    places(v, String::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let at = match edit {
        Edit::Replace { at, .. } | Edit::Remove { at } | Edit::Insert { at, .. } => *at,
    };
    let path = &all[at % all.len()];
    match edit {
        Edit::Replace { with, .. } => {
            if let Some(slot) = v.pointer_mut(path) {
                *slot = with.clone();
            }
        }
        Edit::Remove { .. } => {
            let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
            let last = last.replace("~1", "/").replace("~0", "~");
            match v.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(&last);
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>()
                        && i < a.len()
                    {
                        a.remove(i);
                    }
                }
                _ => {}
            }
        }
        Edit::Insert { key, with, .. } => match v.pointer_mut(path) {
            Some(Value::Object(m)) => {
                m.insert(key.clone(), with.clone());
            }
            Some(Value::Array(a)) => a.push(with.clone()),
            Some(other) => {
                let mut m = serde_json::Map::new();
                m.insert(key.clone(), with.clone());
                *other = Value::Object(m);
            }
            None => {}
        },
    }
}

/// A change to the serialized bytes.
#[derive(Clone, Debug)]
enum ByteEdit {
    Flip { at: usize, bit: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
    Truncate { at: usize },
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<usize>(), 0..8u8).prop_map(|(at, bit)| ByteEdit::Flip { at, bit }),
        (
            any::<usize>(),
            prop_oneof![
                any::<u8>(),
                prop::sample::select(&b"{}[]\":,\\ \n-#&*!|>'"[..])
            ]
        )
            .prop_map(|(at, byte)| ByteEdit::Insert { at, byte }),
        any::<usize>().prop_map(|at| ByteEdit::Delete { at }),
        any::<usize>().prop_map(|at| ByteEdit::Truncate { at }),
    ]
}

fn apply_bytes(bytes: &mut Vec<u8>, edit: &ByteEdit) {
    let len = bytes.len();
    match *edit {
        ByteEdit::Flip { at, bit } if len > 0 => bytes[at % len] ^= 1 << bit,
        ByteEdit::Insert { at, byte } => bytes.insert(at % (len + 1), byte),
        ByteEdit::Delete { at } if len > 0 => {
            bytes.remove(at % len);
        }
        ByteEdit::Truncate { at } => bytes.truncate(at % (len + 1)),
        _ => {}
    }
}

/// Bytes to decode: noise, or a well-formed value edited as JSON and then as bytes.
#[derive(Clone, Debug)]
enum Input {
    Noise(Vec<u8>),
    Mutated {
        value: Value,
        edits: Vec<Edit>,
        byte_edits: Vec<ByteEdit>,
    },
}

fn mutated(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Input> {
    (
        values,
        prop::collection::vec(edit(), 0..4),
        prop::collection::vec(byte_edit(), 0..3),
    )
        .prop_map(|(value, edits, byte_edits)| Input::Mutated {
            value,
            edits,
            byte_edits,
        })
}

impl Input {
    fn value(&self) -> Option<Value> {
        match self {
            Input::Noise(_) => None,
            Input::Mutated { value, edits, .. } => {
                let mut v = value.clone();
                edits.iter().for_each(|e| apply(&mut v, e));
                Some(v)
            }
        }
    }

    fn bytes_of(&self, serialize: impl Fn(&Value) -> Vec<u8>) -> Vec<u8> {
        match self {
            Input::Noise(b) => b.clone(),
            Input::Mutated { byte_edits, .. } => {
                let mut bytes = self.value().map(|v| serialize(&v)).unwrap_or_default();
                byte_edits.iter().for_each(|e| apply_bytes(&mut bytes, e));
                bytes
            }
        }
    }
}

/// The cluster the decode property's reviewer decides against: pool worker rolling to one of
/// the images, so guarded deletions come out denied, allowed and overridden.
fn decode_cluster() -> Snapshot {
    let a = Image {
        repo: 1,
        hex: 1,
        tag: 0,
        spelling: 0,
    }
    .render();
    let b = Image {
        repo: 1,
        hex: 0,
        tag: 0,
        spelling: 0,
    }
    .render();
    Snapshot {
        machine_os_configs: vec![parse(&json!({
            "metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}, "renderedImagePushSpec": "quay.io/x/ocb-image:latest"},
            "status": {"currentImagePullSpec": a}
        }))],
        machine_os_builds: vec![parse(&json!({
            "metadata": {"name": "worker-b1", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
            "status": {"digestedImagePushSpec": a}
        }))],
        pools: vec![parse(&json!({
            "metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}},
            "status": {"conditions": [{"type": "Updating", "status": "True"}]}
        }))],
        nodes: vec![
            Arc::new(node(
                "rolling",
                &NodeSpec {
                    desired: Some(a.clone()),
                    current: Some(b.clone()),
                    state: Some("Working"),
                    role: "worker",
                    extra: "",
                },
            )),
            Arc::new(node(
                "settled",
                &NodeSpec {
                    desired: Some(b.clone()),
                    current: Some(b),
                    state: Some("Done"),
                    role: "worker",
                    extra: "",
                },
            )),
        ],
    }
}

#[test]
fn admission_reviews_never_panic() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let reviewer = Reviewer::new(
        StaticView(Arc::new(decode_cluster())),
        PolicyMode::InFlight,
        Arc::new(Metrics::default()),
        Duration::from_secs(5),
    );
    let (decoded, guarded) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let n = cases("MOSC_GUARD_CASES_DECODE", 2000);
    let inputs = prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Input::Noise),
        2 => review().prop_map(|value| Input::Mutated { value, edits: vec![], byte_edits: vec![] }),
        6 => mutated(review()),
        1 => mutated(json_value()),
    ];
    check("admission_reviews_never_panic", n, inputs, |input| {
        let body = input.bytes_of(|v| serde_json::to_vec(v).expect("serializes"));
        let Ok(req) = admission::decode(&body) else {
            return Ok(());
        };
        decoded.fetch_add(1, Ordering::Relaxed);
        let undecodable_deletion = match admission::classify(&req) {
            Classified::Ignore => false,
            Classified::Delete { subject, .. } => {
                guarded.fetch_add(1, Ordering::Relaxed);
                subject.is_err()
            }
        };
        let response = runtime.block_on(reviewer.review(&req));
        prop_assert_eq!(&response.uid, &req.uid);
        prop_assert!(
            !(undecodable_deletion && response.allowed),
            "a deletion whose object does not decode was allowed"
        );
        let out = serde_json::to_vec(&admission::into_review(response)).expect("serializes");
        prop_assert!(!out.is_empty());
        Ok(())
    });
    let (decoded, guarded) = (decoded.into_inner(), guarded.into_inner());
    println!("  decoded {decoded} reviews, {guarded} of them guarded deletions");
    assert!(
        guarded as f64 > 0.03 * f64::from(n),
        "too few inputs reach the policy"
    );
}

// ---------------------------------------------------------------------------------------------
// Directory files.

/// A file's documents before mutation: objects, lists of them, or anything at all.
fn documents() -> impl Strategy<Value = Value> {
    let object = prop_oneof![
        4 => k8s_object(),
        1 => k8s_object().prop_map(|mut o| {
            o["apiVersion"] = json!(format!("{GROUP}/v1alpha1"));
            o
        }),
        1 => json_value(),
    ];
    let document = prop_oneof![
        3 => object.clone(),
        1 => (prop::sample::select(&["List", "NodeList", "MachineOSConfigList", "List "][..]),
              prop::collection::vec(object.clone(), 0..4))
            .prop_map(|(kind, items)| json!({"apiVersion": "v1", "kind": kind, "items": items})),
    ];
    prop::collection::vec(document, 0..4).prop_map(Value::Array)
}

#[derive(Clone, Debug)]
struct File {
    input: Input,
    extension: &'static str,
    /// YAML documents separated by `---` (else one JSON value per line, for JSON files).
    stream: bool,
}

fn file() -> impl Strategy<Value = File> {
    (
        prop_oneof![
            1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Input::Noise),
            6 => mutated(documents()),
        ],
        prop::sample::select(&["yaml", "yml", "json", "JSON", "txt"][..]),
        any::<bool>(),
    )
        .prop_map(|(input, extension, stream)| File {
            input,
            extension,
            stream,
        })
}

impl File {
    fn bytes(&self) -> Vec<u8> {
        let json = self.extension.eq_ignore_ascii_case("json");
        let stream = self.stream;
        self.input.bytes_of(|v| {
            let docs: Vec<Value> = match v {
                Value::Array(docs) if stream => docs.clone(),
                Value::Array(docs) => docs.first().cloned().into_iter().collect(),
                other => vec![other.clone()],
            };
            let text = if json {
                docs.iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                docs.iter()
                    .map(|d| serde_yaml_ng::to_string(d).expect("serializes"))
                    .collect::<Vec<_>>()
                    .join("---\n")
            };
            text.into_bytes()
        })
    }
}

#[test]
fn directory_files_never_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (targets, blocked) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let n = cases("MOSC_GUARD_CASES_DECODE", 500);
    let files = prop::collection::vec(file(), 1..3);
    check("directory_files_never_panic", n, files, |files| {
        for entry in std::fs::read_dir(dir.path()).expect("read tempdir") {
            std::fs::remove_file(entry.expect("entry").path()).expect("remove");
        }
        for (i, f) in files.iter().enumerate() {
            let path = dir.path().join(format!("f{i}.{}", f.extension));
            std::fs::write(path, f.bytes()).expect("write");
        }
        let loaded = dump::load_dir(dir.path());
        prop_assert!(loaded.is_ok(), "{:?}", loaded.err());
        let Ok(loaded) = loaded else { return Ok(()) };
        let s = &loaded.snapshot;
        let configs = s
            .machine_os_configs
            .iter()
            .map(|c| Deletion::MachineOSConfig(c));
        let builds = s
            .machine_os_builds
            .iter()
            .map(|b| Deletion::MachineOSBuild(b));
        for target in configs.chain(builds) {
            targets.fetch_add(1, Ordering::Relaxed);
            for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
                let verdict = evaluate(s, target, mode);
                if verdict.blocked() {
                    blocked.fetch_add(1, Ordering::Relaxed);
                    prop_assert!(!message::denial(&verdict).is_empty());
                }
            }
        }
        Ok(())
    });
    println!(
        "  {} targets decided, {} blocked",
        targets.into_inner(),
        blocked.into_inner()
    );
}

// ---------------------------------------------------------------------------------------------
// Image identity.

/// A valid reference's repository: optional registry (with port), 1-3 path components.
fn repository() -> impl Strategy<Value = String> {
    (
        prop::option::of(prop::sample::select(
            &[
                "quay.io",
                "registry.example.com:5000",
                "localhost:5000",
                "Quay.IO",
            ][..],
        )),
        prop::collection::vec("[a-z0-9]{1,6}([._-][a-z0-9]{1,4})?", 1..4),
    )
        .prop_map(|(registry, path)| {
            let path = path.join("/");
            match registry {
                Some(r) => format!("{r}/{path}"),
                None => path,
            }
        })
}

fn tag() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"
}

fn hex() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

/// `hex` with the letters chosen by `mask` in upper case.
fn mixed_case(hex: &str, mask: u64) -> String {
    hex.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Laws {
    repo: String,
    other_repo: String,
    tag: String,
    other_tag: String,
    hex: String,
    other_hex: String,
    mask: u64,
    a: String,
    b: String,
}

fn laws() -> impl Strategy<Value = Laws> {
    let any_spec = prop_oneof![
        "\\PC{0,40}",
        (repository(), hex()).prop_map(|(r, h)| format!("{r}@sha256:{h}")),
        image().prop_map(|i| i.render()),
    ];
    (
        (repository(), repository(), tag(), tag()),
        (hex(), hex(), any::<u64>()),
        (any_spec.clone(), any_spec),
    )
        .prop_map(
            |((repo, other_repo, tag, other_tag), (hex, other_hex, mask), (a, b))| Laws {
                repo,
                other_repo,
                tag,
                other_tag,
                hex,
                other_hex,
                mask,
                a,
                b,
            },
        )
}

#[test]
fn image_identity_laws() {
    let n = cases("MOSC_GUARD_CASES_IMAGE", 1000);
    check("image_identity_laws", n, laws(), |l| {
        // Reflexive and symmetric on any text.
        prop_assert!(same_image(&l.a, &l.a));
        prop_assert_eq!(ImageKey::parse(&l.a), ImageKey::parse(&l.a));
        prop_assert_eq!(same_image(&l.a, &l.b), same_image(&l.b, &l.a));
        // The same image has the same digest, which is what the node index files it under.
        if same_image(&l.a, &l.b) {
            let (a, b) = (ImageKey::parse(&l.a), ImageKey::parse(&l.b));
            prop_assert_eq!(a.digest_hex(), b.digest_hex());
        }
        let digested = format!("{}@sha256:{}", l.repo, l.hex);
        let key = ImageKey::parse(&digested);
        prop_assert_eq!(
            key.digest_hex(),
            Some(l.hex.as_str()),
            "{} parses",
            digested
        );
        // Tag-insensitive once a digest is present.
        let tagged = format!("{}:{}@sha256:{}", l.repo, l.tag, l.hex);
        let retagged = format!("{}:{}@sha256:{}", l.repo, l.other_tag, l.hex);
        prop_assert!(same_image(&digested, &tagged), "{} vs {}", digested, tagged);
        prop_assert!(same_image(&tagged, &retagged));
        // Case of the hex and surrounding whitespace do not matter.
        let upper = format!("{}@sha256:{}", l.repo, mixed_case(&l.hex, l.mask));
        prop_assert!(same_image(&digested, &upper), "{} vs {}", digested, upper);
        let upper_key = ImageKey::parse(&upper);
        prop_assert_eq!(upper_key.digest_hex(), Some(l.hex.as_str()));
        let padded = format!(" \t{digested}\n");
        prop_assert!(same_image(&digested, &padded));
        // Different digests, or different repositories, are different images.
        let redigested = format!("{}@sha256:{}", l.repo, l.other_hex);
        prop_assert_eq!(same_image(&digested, &redigested), l.other_hex == l.hex);
        let other = format!("{}@sha256:{}", l.other_repo, l.hex);
        let same_repo =
            mosc_guard::core::image::repo_of(&digested) == mosc_guard::core::image::repo_of(&other);
        prop_assert_eq!(same_image(&digested, &other), same_repo);
        // A tag alone is not a digest: never the same as the digested image.
        let tag_only = format!("{}:{}", l.repo, l.tag);
        prop_assert!(!same_image(&tag_only, &digested));
        Ok(())
    });
}
