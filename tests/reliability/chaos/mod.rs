//! Chaos end to end, on the real control plane, registry, MCO simulator (on 4.20)
//! and mosc-guard process, each case in the middle of the report's rollout (the first worker
//! held mid-update to the new image):
//!
//! - (a) kube-apiserver killed (SIGKILL) and restarted on the same port;
//! - (b) etcd killed and restarted on the same data directory;
//! - (c) the guard cut off from the API server (its kubeconfig goes through a forwarder that
//!   black-holes every connection) for `MOSC_GUARD_CHAOS_OUTAGE_SECS` (default 10; `make soak`
//!   30);
//! - (d) defer mode with two replicas, the leader SIGKILLed while a deletion is deferred.
//!
//! Each asserts: deletions attempted during the fault fail closed (never allowed while a node
//! needs the image; an allow that cannot be confirmed is refused), readiness and metrics say
//! what happened, the same guard process (same pid) serves correct allows and denials
//! afterwards, no pool degrades, and the deletion completes once the rollout settles (no
//! finalizer stranded). Each prints one `chaos <case>:` line with what it observed; recovery
//! times are figures, not assertions.
//!
//! The simulator runs at `SimConfig::fast()` (milliseconds): the faults are under test, not
//! the machine-os-builder's timing.
//!
//! One test binary: the shared set-up and checks are here, the cases in [`control_plane`] (a, b),
//! [`guard_cut_off`] (c) and [`defer_leader`] (d).

mod control_plane;
mod defer_leader;
mod guard_cut_off;

use std::time::{Duration, Instant};

use kube::api::DynamicObject;

use testkit::guard::{Guard, GuardBin};
use testkit::mco;
use testkit::probe::metric;
use testkit::review::{MACHINE_OS_CONFIG, Review};
use testkit::scenario::{Cluster, Rollout, create_infra_mosc, wait_for, wait_for_build};
use testkit::scenario::{
    DegradedWatch, STEP_TIMEOUT, dry_run_delete, seed, wait_for_events_about, wait_mosc_gone,
    wait_pool_reverted, wait_rolled_out,
};
use testkit::simulator::SimConfig;
use testkit::webhooks::{register_mutating_webhook, register_validating_webhook};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";
/// A cache whose watch fails this long makes the guard unready (the default is 30 s); the
/// Lease lives in `default` (the harness has no `mosc-guard` namespace).
const ARGS: &[&str] = &["--stale-after=5", "--lease-namespace=default"];

fn outage() -> Duration {
    let secs = std::env::var("MOSC_GUARD_CHAOS_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

/// The report's rollout with a guard in front, plus pool `infra` with a built MOSC and no
/// nodes: deleting MOSC `worker` must be refused, deleting MOSC `infra` is safe (an allow that
/// needs the confirming fresh read).
struct Setup {
    cluster: Cluster,
    rollout: Rollout,
    watch: DegradedWatch,
}

async fn layered_cluster() -> (Cluster, DegradedWatch) {
    let cluster = seed(SimConfig::fast()).await;
    create_infra_mosc(&cluster).await;
    wait_for_build(&cluster.client, "infra", STEP_TIMEOUT)
        .await
        .expect("infra built");
    let watch = DegradedWatch::start(&cluster.client, "worker");
    (cluster, watch)
}

async fn rollout(cluster: Cluster, watch: DegradedWatch) -> Setup {
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    Setup {
        cluster,
        rollout,
        watch,
    }
}

async fn mosc(cluster: &Cluster, name: &str) -> DynamicObject {
    mco::moscs(&cluster.client)
        .get(name)
        .await
        .expect("read MachineOSConfig")
}

/// Cases (a) to (c)'s set-up: a guard with [`ARGS`] (talking to the API server with `kubeconfig`
/// if given) registered as the validating webhook, the rollout caught, and both decisions right.
async fn guarded_rollout(
    cluster: Cluster,
    watch: DegradedWatch,
    kubeconfig: Option<&std::path::Path>,
) -> (Setup, Guard) {
    let guard = {
        let mut builder = BIN.serve(&cluster.cp).args(ARGS);
        if let Some(kubeconfig) = kubeconfig {
            builder = builder.kubeconfig(kubeconfig);
        }
        builder.start().await.expect("mosc-guard starts")
    };
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("webhook registered");
    let setup = rollout(cluster, watch).await;
    assert_decides_correctly(&setup).await;
    (setup, guard)
}

/// Both answers as they should be on a healthy cluster mid-rollout: worker refused naming the
/// held node, infra allowed.
async fn assert_decides_correctly(setup: &Setup) {
    let refused = dry_run_delete(&setup.cluster.client, "worker")
        .await
        .expect_err("worker is refused while its node is mid-update");
    assert!(
        refused.contains("cannot be deleted yet") && refused.contains(&setup.rollout.node),
        "{refused}"
    );
    dry_run_delete(&setup.cluster.client, "infra")
        .await
        .expect("infra (no node needs it) is allowed");
}

/// Reviews posted to the guard directly while the API server cannot be asked: both must be
/// refused (worker from the cache; infra because the allow cannot be confirmed).
async fn assert_direct_reviews_fail_closed(
    guard: &Guard,
    worker: &DynamicObject,
    infra: &DynamicObject,
) -> Vec<String> {
    let mut seen = Vec::new();
    for (i, obj) in [worker, infra].into_iter().enumerate() {
        let old = serde_json::to_value(obj).expect("json");
        let review = Review::delete(MACHINE_OS_CONFIG, old)
            .uid(&format!("chaos-{i}"))
            .dry_run(true)
            .json();
        let (allowed, message) = guard.post_review(&review).await.expect("the guard answers");
        assert!(!allowed, "allowed during the outage: {message}");
        seen.push(first_line(&message));
    }
    seen
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(160)
        .collect()
}

/// Waits until /readyz answers `status`; returns its body and how long it took.
async fn wait_readyz(guard: &Guard, status: u16, timeout: Duration) -> (String, Duration) {
    let started = Instant::now();
    let body = guard
        .wait_status("/readyz", status, timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (body, started.elapsed())
}

/// The stale caches /metrics names (`mosc_guard_cache_stale{cache="..."} 1`).
fn stale_caches(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("mosc_guard_cache_stale{") && l.ends_with(" 1"))
        .filter_map(|l| l.split('"').nth(1).map(str::to_owned))
        .collect()
}

fn failed_confirmations(metrics: &str) -> f64 {
    metric(metrics, "mosc_guard_confirmations_total{result=\"failed\"}").unwrap_or(0.0)
}

/// The end of every case: the node reaches the image, the rollout settles, MOSC worker is
/// deleted for real and the pool leaves image mode, never Degraded. Returns how long after the
/// rollout settled the guard let the deletion through: a cache that has not caught up yet
/// (its watch still in backoff after the fault) refuses for a moment, which is safe.
async fn finish(setup: &Setup) -> Duration {
    setup.cluster.sim.release(&setup.rollout.node);
    wait_rolled_out(&setup.cluster, &setup.rollout.build.image).await;
    let settled = Instant::now();
    let mut last = None;
    while settled.elapsed() < Duration::from_secs(120) {
        let out = setup
            .cluster
            .cp
            .kubectl(["delete", "machineosconfig", "worker"])
            .await
            .expect("kubectl");
        if out.success() {
            last = None;
            break;
        }
        last = Some(out);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(last.is_none(), "settled: the delete goes through: {last:?}");
    let took = settled.elapsed();
    wait_pool_reverted(&setup.cluster).await;
    assert!(!setup.watch.ever_degraded(), "pool worker degraded");
    assert_eq!(setup.cluster.sim.rejected_writes(), Vec::<String>::new());
    took
}
