//! One admission decision over a large cluster: the webhook's indexed path (candidate
//! nodes from the digest index), the full scan (`check`, and the pure policy over every
//! node), and a baseline measured in the same run: a bare pass over every node's
//! annotations, what any policy reading every node must at least pay; and `serve`'s scrape-time
//! gauge of nodes stuck on a lost image (`core::recovery::stuck`). Also prints
//! p50/p99 of single decisions and the heap held by the snapshot and the index, since
//! criterion reports neither.
//!
//! Run: `cargo bench --bench decision` (figures are recorded in BENCHMARKS.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use criterion::{BenchmarkId, Criterion};
use mosc_guard::core::model::{MachineOSConfig, node_annotations};
use mosc_guard::core::node::NodeMeta;
use mosc_guard::core::node::{Interner, WireNode};
use mosc_guard::core::policy::NodeIndex;
use mosc_guard::core::policy::{Deletion, PolicyMode, Verdict, evaluate, evaluate_indexed};
use mosc_guard::core::recovery::stuck::stuck_per_pool;
use mosc_guard::core::snapshot::Snapshot;
use serde_json::json;

/// Counts live heap bytes so the bench can report what a snapshot holds.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

fn digest(i: usize) -> String {
    format!("{i:064x}")
}

fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("bench fixture"))
}

/// Where the worker pool's rollout of its config's newest image stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Two thirds of the nodes layered and settled on an older image, three nodes rolling to
    /// the new one, the rest not layered: the deletion is denied.
    Rolling,
    /// Every worker runs the new image, infra nodes are not layered: the deletion is allowed,
    /// which only a pass over every node can show.
    Settled,
}

/// A cluster of `n` nodes in pools worker and infra (two workers for one infra node), at
/// `shape`. Node metadata is shaped like a real node's (labels, MCO annotations), without
/// managedFields.
fn cluster(n: usize, shape: Shape) -> (Snapshot, MachineOSConfig) {
    let new = format!("{REPO}@sha256:{}", digest(1));
    let old = format!("{REPO}@sha256:{}", digest(2));
    let node = |i: usize| {
        let worker = i % 3 != 1;
        let (desired, current, state) = match (shape, i) {
            (Shape::Settled, _) if worker => (Some(&new), Some(&new), "Done"),
            (Shape::Settled, _) => (None, None, "Done"),
            (Shape::Rolling, 0..=2) => (Some(&new), Some(&old), "Working"),
            (Shape::Rolling, _) if i.is_multiple_of(3) => (None, None, "Done"),
            (Shape::Rolling, _) => (Some(&old), Some(&old), "Done"),
        };
        let mut ann = serde_json::Map::new();
        ann.insert(node_annotations::STATE.into(), json!(state));
        ann.insert(
            "machineconfiguration.openshift.io/desiredConfig".into(),
            json!("rendered-worker-2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e"),
        );
        ann.insert(
            "machineconfiguration.openshift.io/currentConfig".into(),
            json!("rendered-worker-2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e"),
        );
        ann.insert(
            "volumes.kubernetes.io/controller-managed-attach-detach".into(),
            json!("true"),
        );
        if let Some(d) = desired {
            ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
        }
        if let Some(c) = current {
            ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
        }
        let role = ["worker", "infra", "worker"][i % 3];
        json!({"metadata": {
            "name": format!("ip-10-0-{}-{}.us-east-2.compute.internal", i / 250, i % 250),
            "uid": format!("{:08x}-0000-4000-8000-{:012x}", i, i),
            "resourceVersion": format!("{}", 100000 + i),
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                format!("node-role.kubernetes.io/{role}"): "",
                "topology.kubernetes.io/zone": "us-east-2a",
                "kubernetes.io/hostname": format!("ip-10-0-{}-{}", i / 250, i % 250)
            },
            "annotations": ann
        }})
    };
    let mosc: MachineOSConfig = serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "spec": {"machineConfigPool": {"name": "worker"}, "renderedImagePushSpec": format!("{REPO}:latest")},
        "status": {"currentImagePullSpec": new}
    }))
    .expect("bench fixture");
    let snapshot = Snapshot {
        machine_os_configs: vec![Arc::new(mosc.clone())],
        machine_os_builds: (1..=2)
            .map(|b| parse(json!({
                "metadata": {"name": format!("worker-{b}"), "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
                "status": {"digestedImagePushSpec": format!("{REPO}@sha256:{}", digest(b))}
            })))
            .collect(),
        // Pool worker reports Updating; the pool rule reads its nodes, not that.
        pools: ["master", "worker", "infra"]
            .iter()
            .map(|p| {
                let updating = if *p == "worker" { "True" } else { "False" };
                parse(json!({
                    "metadata": {"name": p},
                    "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{p}"): ""}}},
                    "status": {"conditions": [{"type": "Updating", "status": updating}]}
                }))
            })
            .collect(),
        // One interner for all nodes, as the node cache of `serve` builds them: nodes share
        // their label strings and image references.
        nodes: {
            let mut interner = Interner::default();
            (0..n)
                .map(|i| {
                    let wire: WireNode = serde_json::from_value(node(i)).expect("bench fixture");
                    Arc::new(NodeMeta::from_wire(wire.metadata, &mut interner, |_| true))
                })
                .collect()
        },
        machines: Vec::new(),
        release: mosc_guard::core::release::ClusterRelease::given("4.20.8"),
    };
    (snapshot, mosc)
}

/// Baseline: look up the desired-image annotation of every node and nothing more.
fn scan_only(s: &Snapshot) -> usize {
    s.nodes
        .iter()
        .filter(|n| n.desired_image().is_some())
        .count()
}

/// The webhook's path: builds and configs from the cache, candidate nodes from the index.
fn indexed(
    objects: &Snapshot,
    (index, store): &(NodeIndex, Store),
    mosc: &MachineOSConfig,
    mode: PolicyMode,
) -> Verdict {
    // As `serve` does (`Engine::cached`): candidate names from the index, nodes from the
    // store, or every node when the policy needs them all.
    evaluate_indexed(
        objects,
        Deletion::MachineOSConfig(mosc),
        mode,
        |digests| match digests {
            Some(d) => index
                .candidates(d, mode)
                .iter()
                .filter_map(|name| store.get(name.as_ref()).cloned())
                .collect(),
            None => store.values().cloned().collect(),
        },
    )
}

/// Stand-in for the reflector store's name lookup.
type Store = HashMap<String, Arc<NodeMeta>>;

fn index_of(snapshot: &Snapshot) -> (Snapshot, (NodeIndex, Store)) {
    let mut index = NodeIndex::default();
    let mut store = Store::new();
    for node in &snapshot.nodes {
        index.upsert(node);
        store.insert(node.name().to_string(), Arc::clone(node));
    }
    let objects = Snapshot {
        nodes: Vec::new(),
        ..snapshot.clone()
    };
    (objects, (index, store))
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("decision");
    group.sample_size(20);
    for n in [5_000, 50_000] {
        // The settled pool, allowed: the decision when an admin leaves image mode.
        let (snapshot, mosc) = cluster(n, Shape::Settled);
        let (objects, index) = index_of(&snapshot);
        let mode = PolicyMode::InFlight;
        group.bench_with_input(BenchmarkId::new("settled-full-scan", n), &n, |b, _| {
            b.iter(|| evaluate(black_box(&snapshot), Deletion::MachineOSConfig(&mosc), mode))
        });
        group.bench_with_input(BenchmarkId::new("settled-indexed", n), &n, |b, _| {
            b.iter(|| indexed(black_box(&objects), &index, &mosc, mode))
        });
        drop((snapshot, objects, index));

        let (snapshot, mosc) = cluster(n, Shape::Rolling);
        let (objects, index) = index_of(&snapshot);
        group.bench_with_input(BenchmarkId::new("baseline-scan", n), &n, |b, _| {
            b.iter(|| black_box(scan_only(black_box(&snapshot))))
        });
        // serve's gauge of nodes stuck on a lost image, at each scrape: over the nodes the
        // index says are short of their image (what serve hands it), and over every node (the
        // bound, were every node mid-update at once).
        let unreached = Snapshot {
            nodes: index
                .0
                .unreached()
                .into_iter()
                .filter_map(|name| index.1.get(name.as_ref()).cloned())
                .collect(),
            ..objects.clone()
        };
        group.bench_with_input(BenchmarkId::new("stuck-gauge-unreached", n), &n, |b, _| {
            b.iter(|| stuck_per_pool(black_box(&unreached)))
        });
        group.bench_with_input(BenchmarkId::new("stuck-gauge-every-node", n), &n, |b, _| {
            b.iter(|| stuck_per_pool(black_box(&snapshot)))
        });
        for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
            group.bench_with_input(
                BenchmarkId::new(format!("full-scan-{mode}"), n),
                &n,
                |b, _| {
                    b.iter(|| {
                        evaluate(black_box(&snapshot), Deletion::MachineOSConfig(&mosc), mode)
                    })
                },
            );
            group.bench_with_input(
                BenchmarkId::new(format!("indexed-{mode}"), n),
                &n,
                |b, _| b.iter(|| indexed(black_box(&objects), &index, &mosc, mode)),
            );
        }
    }
    group.finish();
}

/// p50/p99 of single in-flight decisions, and the heap a node snapshot and index hold.
fn percentiles() {
    for n in [5_000, 50_000] {
        let (snapshot, mosc) = cluster(n, Shape::Settled);
        let (objects, index) = index_of(&snapshot);
        let mode = PolicyMode::InFlight;
        let settled = |f: &dyn Fn() -> Verdict| {
            sample(&|| {
                let v = f();
                assert!(v.allowed, "the settled fixture is allowed");
            })
        };
        println!(
            "n={n}: settled, indexed decision {}; full scan {}",
            settled(&|| indexed(&objects, &index, &mosc, mode)),
            settled(&|| evaluate(&snapshot, Deletion::MachineOSConfig(&mosc), mode)),
        );
        drop((snapshot, objects, index));

        let before = LIVE.load(Ordering::Relaxed);
        let (snapshot, mosc) = cluster(n, Shape::Rolling);
        let held = LIVE.load(Ordering::Relaxed) - before;
        let before = LIVE.load(Ordering::Relaxed);
        let (objects, index) = index_of(&snapshot);
        let index_held = LIVE.load(Ordering::Relaxed) - before;
        let time = |f: &dyn Fn() -> Verdict| {
            sample(&|| {
                let v = f();
                assert_eq!(v.blocking.len(), 3, "fixture has three rolling nodes");
            })
        };
        println!(
            "n={n}: rolling, indexed decision {}; full scan {}; snapshot heap {:.1} MiB ({} B/node), index {:.1} MiB",
            time(&|| indexed(&objects, &index, &mosc, mode)),
            time(&|| evaluate(&snapshot, Deletion::MachineOSConfig(&mosc), mode)),
            held as f64 / (1024.0 * 1024.0),
            held / n as isize,
            index_held as f64 / (1024.0 * 1024.0),
        );
    }
}

/// p50 and p99 of 1,000 timed calls of `f`.
fn sample(f: &dyn Fn()) -> String {
    let mut samples: Vec<f64> = (0..1_000)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    format!("p50 {:.1} µs, p99 {:.1} µs", at(0.50), at(0.99))
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    percentiles();
    c.final_summary();
}
