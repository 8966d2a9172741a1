//! The engine with concurrent requests: the requests one confirming read serves for the same
//! target are decided once, different targets apart, a request that arrived after a read
//! started is decided on a read and a verdict of its own, and concurrent requests for one
//! target share the cached decision running when they arrive. Decisions are counted, not timed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::{BoxFuture, join_all};
use serde_json::{Value, json};

use super::*;
use crate::access::error::NotReady;
use crate::access::view::{Fresh, FreshNodes};
use crate::core::model::{LABEL_MACHINE_OS_CONFIG, LABEL_TARGET_POOL, MachineOSConfig};
use crate::core::node::NodeMeta;
use crate::core::release::ClusterRelease;
use crate::core::snapshot::Snapshot;

const IMAGE: &str =
    "quay.example/ocb@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OLD: &str =
    "quay.example/ocb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// How long each confirming read takes (paused clock).
const READ: Duration = Duration::from_millis(30);

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("fixture")
}

/// MachineOSConfig `name` of pool `name` with the given uid, current on [`IMAGE`].
fn mosc(name: &str, uid: &str) -> MachineOSConfig {
    parse(json!({
        "metadata": {"name": name, "uid": uid},
        "spec": {"machineConfigPool": {"name": name}},
        "status": {"currentImagePullSpec": IMAGE, "machineOSBuild": {"name": format!("{name}-1")}}
    }))
}

/// Pool `worker`, its config and build as MCO writes them, and one worker node on `current`.
fn cluster(current: &str) -> Snapshot {
    let state = if current == IMAGE { "Done" } else { "Working" };
    Snapshot {
        machine_os_configs: vec![Arc::new(mosc("worker", "uid-worker"))],
        machine_os_builds: vec![Arc::new(parse(json!({
            "metadata": {"name": "worker-1",
                "labels": {LABEL_MACHINE_OS_CONFIG: "worker", LABEL_TARGET_POOL: "worker"},
                "ownerReferences": [{"apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineOSConfig", "name": "worker", "uid": "uid-worker",
                    "controller": true}]},
            "spec": {"machineOSConfig": {"name": "worker"}},
            "status": {"digestedImagePushSpec": IMAGE}
        })))],
        pools: vec![Arc::new(parse(json!({
            "metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}
        })))],
        nodes: vec![Arc::new(parse::<NodeMeta>(json!({"metadata": {
            "name": "worker-0",
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/desiredImage": IMAGE,
                "machineconfiguration.openshift.io/currentImage": current,
                "machineconfiguration.openshift.io/state": state
            }
        }})))],
        release: ClusterRelease::given("4.23.0"),
        ..Default::default()
    }
}

/// A cluster that moves through `states`: the caches hold the first; each confirming read takes
/// [`READ`] and leaves the node cache at the next state (the last one stays), its nodes to be
/// read from that cache (the fence passed). Counts cached decisions (each reads the cached
/// objects once) and node-cache reads made after the first read returned: one per evaluation
/// on a fresh read, when every cached decision came before it. Node-cache reads before that
/// take `slow_cache` (a scan of a large cluster).
struct Scripted {
    states: Vec<Snapshot>,
    at: AtomicUsize,
    slow_cache: Duration,
    cached_decisions: AtomicUsize,
}

impl Scripted {
    fn new(states: Vec<Snapshot>) -> Self {
        Self {
            states,
            at: AtomicUsize::new(0),
            slow_cache: Duration::ZERO,
            cached_decisions: AtomicUsize::new(0),
        }
    }

    fn now(&self) -> Snapshot {
        Snapshot {
            nodes: Vec::new(),
            ..self.states[self.at.load(Ordering::SeqCst)].clone()
        }
    }
}

impl ClusterView for Scripted {
    fn objects(&self) -> Snapshot {
        self.cached_decisions.fetch_add(1, Ordering::SeqCst);
        self.now()
    }

    fn nodes(&self, _: Option<&BTreeSet<String>>, _: PolicyMode) -> Vec<Arc<NodeMeta>> {
        std::thread::sleep(self.slow_cache);
        self.states[self.at.load(Ordering::SeqCst)].nodes.clone()
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        Box::pin(async move {
            tokio::time::sleep(READ).await;
            let next = (self.at.load(Ordering::SeqCst) + 1).min(self.states.len() - 1);
            self.at.store(next, Ordering::SeqCst);
            Ok(Fresh {
                objects: self.now(),
                nodes: FreshNodes::Cached,
                ..Fresh::default()
            })
        })
    }

    fn readiness(&self) -> Result<(), NotReady> {
        Ok(())
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

fn engine(states: Vec<Snapshot>, window: Duration) -> Engine<Scripted> {
    let metrics = Arc::new(Metrics::default());
    Engine::new(
        Scripted::new(states),
        PolicyMode::default(),
        metrics,
        Duration::from_secs(5),
    )
    .with_confirm_batch_window(window)
}

fn confirmed(checked: Checked) -> Verdict {
    match checked {
        Checked::Decided(v) => v,
        other => panic!("not decided: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn four_requests_that_one_read_serves_for_one_target_are_decided_once() {
    // Four requests arrive within the batching window: one read, one evaluation.
    let engine = engine(vec![cluster(IMAGE)], Duration::from_millis(5));
    let worker = mosc("worker", "uid-worker");
    let target = Deletion::MachineOSConfig(&worker);
    let checked = join_all((0..4).map(|_| engine.check(target))).await;
    let alone = policy::evaluate(&cluster(IMAGE), target, engine.mode);
    assert!(alone.allowed, "{alone:?}");
    for c in checked {
        assert_eq!(confirmed(c), alone);
    }
    assert_eq!(engine.confirmations.reads(), 1);
    assert_eq!(
        engine.fresh_decisions.load(Ordering::SeqCst),
        1,
        "four requests served by one read evaluated the nodes more than once"
    );
    // On one thread their cached decisions ran one after another, none while another ran:
    // a finished one is not shared.
    assert_eq!(engine.view.cached_decisions.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn requests_for_different_targets_on_one_read_are_decided_apart() {
    // The worker node is rolling to the config's image: deleting the config is refused.
    let engine = engine(vec![cluster(OLD)], Duration::from_millis(5));
    let worker = mosc("worker", "uid-worker");
    // The same name with another uid (a forged review, or a recreated config): on 4.23 MCO
    // deletes only the builds a config controls, so it guards nothing and is allowed. Sharing
    // by name would refuse it.
    let forged = mosc("worker", "uid-other");
    let infra = mosc("infra", "uid-infra");
    let targets = [&worker, &forged, &worker, &infra].map(Deletion::MachineOSConfig);
    let checked = join_all(targets.iter().map(|t| engine.check(*t))).await;
    let verdicts: Vec<Verdict> = checked.into_iter().map(confirmed).collect();
    for (verdict, target) in verdicts.iter().zip(targets) {
        // A refusal by a node is decided from the index's candidates: its pools uncounted.
        let uncounted = |v: &Verdict| Verdict {
            rolling: Vec::new(),
            ..v.clone()
        };
        assert_eq!(
            uncounted(verdict),
            uncounted(&policy::evaluate(&cluster(OLD), target, engine.mode))
        );
    }
    let allowed: Vec<bool> = verdicts.iter().map(|v| v.allowed).collect();
    assert_eq!(allowed, [false, true, false, true]);
    assert_eq!(engine.confirmations.reads(), 1);
    assert_eq!(
        engine.fresh_decisions.load(Ordering::SeqCst),
        3,
        "three distinct targets, three evaluations"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_that_arrives_after_a_read_started_gets_a_verdict_of_its_own() {
    // The first read sees the node rolling; by the second it has reached the image.
    let engine = engine(
        vec![cluster(OLD), cluster(OLD), cluster(IMAGE)],
        Duration::ZERO,
    );
    let worker = mosc("worker", "uid-worker");
    let target = Deletion::MachineOSConfig(&worker);
    // The first starts its read at once (no window); the second arrives 10 ms into it.
    let later = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        engine.check(target).await
    };
    let (first, second) = tokio::join!(engine.check(target), later);
    let (first, second) = (confirmed(first), confirmed(second));
    assert!(!first.allowed, "decided on the first read: {first:?}");
    assert!(second.allowed, "decided on a read of its own: {second:?}");
    assert_eq!(engine.confirmations.reads(), 2);
    assert_eq!(engine.fresh_decisions.load(Ordering::SeqCst), 2);
}

/// A cached decision that scans for long holds one of two workers: the other requests arrive
/// on the other meanwhile and share it, then one read and one evaluation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_arriving_during_a_cached_decision_share_it() {
    let mut view = Scripted::new(vec![cluster(IMAGE)]);
    view.slow_cache = Duration::from_millis(100);
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(
        Engine::new(view, PolicyMode::default(), metrics, Duration::from_secs(5))
            .with_confirm_batch_window(Duration::from_millis(5)),
    );
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                // Each request decodes its own copy of the object.
                let worker = mosc("worker", "uid-worker");
                confirmed(engine.check(Deletion::MachineOSConfig(&worker)).await)
            })
        })
        .collect();
    for r in requests {
        assert!(r.await.expect("request").allowed);
    }
    assert_eq!(engine.view.cached_decisions.load(Ordering::SeqCst), 1);
    assert_eq!(engine.confirmations.reads(), 1);
    assert_eq!(engine.fresh_decisions.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_confirmed_decision_times_its_phases() {
    let window = Duration::from_millis(2);
    let engine = engine(vec![cluster(IMAGE)], window);
    let worker = mosc("worker", "uid-worker");
    assert!(confirmed(engine.check(Deletion::MachineOSConfig(&worker)).await).allowed);
    let text = engine.metrics.render(&[], &[], true);
    let series = |what: &str, phase: &str| {
        let series =
            format!("mosc_guard_decision_phase_duration_seconds_{what}{{phase=\"{phase}\"}}");
        text.lines()
            .find_map(|l| l.strip_prefix(&series)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{series} not exported:\n{text}"))
    };
    for phase in ["cached", "wait", "read", "fresh"] {
        assert_eq!(series("count", phase), 1.0, "{phase}");
    }
    // The paused clock moves only while the read and its window wait: the read started when
    // the window closed (`wait`), then took `READ`.
    assert_eq!(series("sum", "cached"), 0.0);
    let (wait, read) = (series("sum", "wait"), series("sum", "read"));
    assert!(
        (wait - window.as_secs_f64()).abs() < 2e-3,
        "wait phase {wait} s, the window is {window:?}"
    );
    assert!(
        (read - READ.as_secs_f64()).abs() < 1e-6,
        "read phase {read} s, the read takes {READ:?}"
    );
}

/// A view whose caches say what their objects' versions and node generation are.
fn versioned(mut snapshot: Snapshot, rv: &str) -> Snapshot {
    let set = |meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.resource_version = Some(rv.to_string());
    };
    snapshot.machine_os_configs = snapshot
        .machine_os_configs
        .iter()
        .map(|m| {
            let mut m = (**m).clone();
            set(&mut m.metadata);
            Arc::new(m)
        })
        .collect();
    snapshot.machine_os_builds = snapshot
        .machine_os_builds
        .iter()
        .map(|b| {
            let mut b = (**b).clone();
            set(&mut b.metadata);
            Arc::new(b)
        })
        .collect();
    snapshot.pools = snapshot
        .pools
        .iter()
        .map(|p| {
            let mut p = (**p).clone();
            set(&mut p.metadata);
            Arc::new(p)
        })
        .collect();
    snapshot
}

/// [`Scripted`] with a node generation: `generations` says what it is at each state.
struct Generations {
    inner: Scripted,
    generations: Vec<u64>,
}

impl ClusterView for Generations {
    fn objects(&self) -> Snapshot {
        self.inner.objects()
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        self.inner.nodes(digests, mode)
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, FreshError>> {
        self.inner.fresh()
    }

    fn node_generation(&self) -> Option<u64> {
        Some(self.generations[self.inner.at.load(Ordering::SeqCst)])
    }

    fn readiness(&self) -> Result<(), NotReady> {
        Ok(())
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

/// A read that shows exactly what the cached verdict was decided on (the same objects'
/// versions, the same node generation) confirms it without a second evaluation; one that shows
/// another generation or another version of an object is evaluated again.
#[tokio::test(start_paused = true)]
async fn a_read_showing_what_the_cached_verdict_read_confirms_it_without_a_second_evaluation() {
    let worker = mosc("worker", "uid-worker");
    let target = Deletion::MachineOSConfig(&worker);
    let cases = [
        (
            "unchanged",
            vec![versioned(cluster(IMAGE), "5"); 2],
            vec![7, 7],
            0,
        ),
        (
            "a node changed",
            vec![versioned(cluster(IMAGE), "5"); 2],
            vec![7, 8],
            1,
        ),
        (
            "an object changed",
            vec![
                versioned(cluster(IMAGE), "5"),
                versioned(cluster(IMAGE), "6"),
            ],
            vec![7, 7],
            1,
        ),
    ];
    for (what, states, generations, evaluations) in cases {
        let view = Generations {
            inner: Scripted::new(states),
            generations,
        };
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::new(view, PolicyMode::default(), metrics, Duration::from_secs(5));
        let verdict = confirmed(engine.check(target).await);
        assert!(verdict.allowed, "{what}: {verdict:?}");
        assert_eq!(
            engine.fresh_decisions.load(Ordering::SeqCst),
            evaluations,
            "{what}"
        );
    }
}
