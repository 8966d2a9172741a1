//! Race soak: many randomized trials on one real control plane, the MCO
//! simulator (on 4.20) and the real mosc-guard process, interleaving what MCO does (targeting nodes,
//! nodes reaching their image, pools starting and finishing rollouts) with an admin's deletions
//! of the trial's MachineOSConfig and MachineOSBuilds (dry-run and real), in deny mode and in
//! defer mode, some trials across a guard restart (SIGKILL) or an API-server restart.
//!
//! Every trial gets its own pool, nodes and MachineOSConfig (name = pool), so trials are
//! independent while several run at once. The oracle reads the API server, never the guard:
//!
//! - **false allow**: immediately before each deletion a consistent list of the pool's nodes
//!   (with builds, MachineOSConfig and pool) is read; a node *blocks* when its desiredImage is
//!   one of the object's images and its currentImage differs. A deletion allowed while a node
//!   blocked, that node unchanged (same resourceVersion) in a second list read after the answer,
//!   was allowed while the node needed the image at the moment of the decision: a false allow.
//!   (If every blocking node moved on in between, the allow is counted as `raced`, not as a
//!   false allow: the guard may have decided after the node reached its image.) In defer mode a
//!   MachineOSConfig carrying the finalizer is accepted by design; there the object's removal is
//!   bracketed the same way (a node list before the last read that still saw it, another after
//!   the first read that did not) and a node blocking unchanged across the removal is a false
//!   allow.
//! - **degraded**: a node of the pool ends Degraded, or the pool reports Degraded/NodeDegraded
//!   (the simulator degrades a node whose image was deleted: "manifest unknown").
//! - **false denial**: denied although the pre-read showed it safe (no blocking node, and the
//!   pool not rolling out one of the images, the README's pool rule) and a read after the answer
//!   still does. Reported with the denial messages bucketed, not asserted.
//! - **stranded**: once a trial's rollout has settled, its MachineOSConfig must be gone and
//!   carry no mosc-guard finalizer; a final sweep checks every MachineOSConfig again.
//! - **liveness**: from the moment the oracle first sees the MachineOSConfig safe to delete (no
//!   node needing its images, its pool not rolling one out), the deletion is allowed (deny) or
//!   the object is gone (defer) within [`LIVENESS_BOUND`]; a trial that never settles, or whose
//!   set-up fails, is a failure too, so a guard that refuses everything fails the soak.
//! - **MCO refused**: no request of the simulated machine-os-builder (which acts as MCO's own
//!   service account, through the webhook) is refused.
//!
//! `MOSC_GUARD_SOAK_TRIALS` (default 16, split between the two modes), `MOSC_GUARD_SOAK_SEED`
//! (printed; the same seed replays the same choices, not the same timings),
//! `MOSC_GUARD_SOAK_CONCURRENCY` (trials at once, default 4), `MOSC_GUARD_SOAK_BUDGET_SECS`
//! (start no trial after this many seconds; the summary counts those that ran).
//!
//! The simulator runs at `SimConfig::fast()` (milliseconds, delete events handled 100 ms late):
//! the interleavings are under test, and hundreds of rollouts at the builder's real timing would
//! not fit a run.
//!
//! One test binary: the trial's configuration, random choices and the soak loop are here; what
//! a trial observes (nodes, the config, the pool) is in [`observe`], the tally and summary in
//! [`tally`], a trial's steps in [`trial`] (set-up, deletion attempts, MCO's moves, chaos) and
//! [`settle`] (the deletion accepted, the pool settled, the verdict on the trial).

mod observe;
mod settle;
mod tally;
mod trial;

use observe::*;
use tally::*;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use testkit::guard::{Guard, GuardBin};
use testkit::mco::{
    self, CURRENT_IMAGE, DESIRED_IMAGE, LABEL_MOSC, STATE, STATE_DEGRADED, STATE_DONE, str_at,
};
use testkit::net::free_port;
use testkit::scenario::{Cluster, create_mosc, create_nodes, create_pool, rendered_config};
use testkit::simulator::SimConfig;
use testkit::webhooks::{register_mutating_webhook, register_validating_webhook};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// How long a trial waits for its rollout to settle and its MachineOSConfig to go.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(180);

/// Liveness: once the oracle first sees a trial's MachineOSConfig safe to delete, the deletion
/// must be allowed (deny mode) or the object gone (defer mode: the controller re-checks on a
/// backoff capped at 10 s) within this. Generous, because a trial may run across a guard or
/// API-server restart; the soak prints the distribution.
const LIVENESS_BOUND: Duration = Duration::from_secs(30);

/// Every this many trials, one restarts the guard and one the API server.
const CHAOS_PERIOD: usize = 25;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Deny,
    Defer,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Deny => "deny",
            Mode::Defer => "defer",
        }
    }

    fn args(self) -> Vec<&'static str> {
        match self {
            Mode::Deny => vec!["--lease-namespace", "default"],
            Mode::Defer => vec!["--deletion-mode", "defer", "--lease-namespace", "default"],
        }
    }
}

/// SplitMix64: small, seedable, good enough to pick timings and steps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn seed() -> u64 {
    env_number("MOSC_GUARD_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

fn total_trials() -> usize {
    env_number("MOSC_GUARD_SOAK_TRIALS").unwrap_or(16) as usize
}

fn concurrency() -> usize {
    env_number("MOSC_GUARD_SOAK_CONCURRENCY")
        .unwrap_or(4)
        .max(1) as usize
}

/// One soak run: the cluster, the guard (restartable on the same ports) and the counters.
struct Soak {
    mode: Mode,
    seed: u64,
    cluster: Cluster,
    guard: tokio::sync::Mutex<Guard>,
    /// The logs of the guards killed so far (a guard's log goes with it).
    killed_logs: Mutex<Vec<String>>,
    ports: (u16, u16),
    /// Serializes restarts (one fault at a time).
    chaos: tokio::sync::Mutex<()>,
    /// Odd while a guard restart is in progress; bumped at its start and end.
    guard_epoch: AtomicU64,
    apiserver_epoch: AtomicU64,
    stats: Mutex<Stats>,
}

impl Soak {
    fn stats<T>(&self, f: impl FnOnce(&mut Stats) -> T) -> T {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    async fn restart_guard(&self, rng: &mut Rng) {
        let _one = self.chaos.lock().await;
        self.guard_epoch.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.guard.lock().await;
        tracing::info!("soak: SIGKILL the guard (pid {})", guard.pid());
        guard.kill();
        let log = guard.log();
        self.killed_logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(log);
        tokio::time::sleep(rng.millis(0, 2000)).await;
        let args = self.mode.args();
        let mut started = None;
        for _ in 0..3 {
            match BIN
                .serve(&self.cluster.cp)
                .port(self.ports.0)
                .metrics_port(self.ports.1)
                .args(&args)
                .start()
                .await
            {
                Ok(g) => {
                    started = Some(g);
                    break;
                }
                Err(e) => tracing::warn!("soak: restarting the guard: {e}"),
            }
        }
        *guard = started.expect("the guard restarts on the same ports");
        self.guard_epoch.fetch_add(1, Ordering::SeqCst);
        self.stats(|s| s.guard_restarts += 1);
    }

    async fn restart_apiserver(&self, rng: &mut Rng) {
        let _one = self.chaos.lock().await;
        self.apiserver_epoch.fetch_add(1, Ordering::SeqCst);
        self.cluster.cp.kill_apiserver();
        tokio::time::sleep(rng.millis(0, 3000)).await;
        self.cluster
            .cp
            .start_apiserver_again()
            .await
            .expect("kube-apiserver restarts");
        self.apiserver_epoch.fetch_add(1, Ordering::SeqCst);
        self.stats(|s| s.apiserver_restarts += 1);
    }
}

/// What the API server answered.
enum Answer {
    Allowed,
    Denied(String),
    NotFound,
    Failed(String),
}

async fn delete(client: &kube::Client, target: &Target, dry_run: bool) -> Answer {
    let params = DeleteParams {
        dry_run,
        ..Default::default()
    };
    let result = match target {
        Target::Mosc(n) => mco::moscs(client).delete(n, &params).await,
        Target::Mosb(n) => mco::mosbs(client).delete(n, &params).await,
    };
    match result {
        Ok(_) => Answer::Allowed,
        Err(kube::Error::Api(s)) if s.code == 404 => Answer::NotFound,
        Err(kube::Error::Api(s))
            if s.message.contains("admission webhook") || s.message.contains("calling webhook") =>
        {
            Answer::Denied(s.message.clone())
        }
        Err(e) => Answer::Failed(e.to_string()),
    }
}

/// One trial's state.
struct Trial<'a> {
    soak: &'a Soak,
    index: usize,
    pool: String,
    nodes: Vec<String>,
    held: BTreeSet<String>,
    rng: Rng,
    /// Every image of this trial's builds seen so far (the cleanup deletes them all).
    images: BTreeSet<String>,
    /// A real deletion of the MachineOSConfig went through (deny) or was accepted (defer).
    deleted: bool,
    chaos_done: bool,
    /// When the oracle last began to see the MachineOSConfig safe to delete (reset when it
    /// stops being safe): the start of the liveness clock.
    safe_since: Option<Instant>,
    /// What the trial did, with times, for the notes about a trial that went wrong.
    log: Vec<String>,
    began: Instant,
}

/// What one deletion attempt came to (for the trial's flow).
#[derive(PartialEq, Eq)]
enum Attempt {
    Allowed,
    Accepted,
    Denied,
    Skipped,
}

async fn soak(mode: Mode) {
    let started = Instant::now();
    let total = total_trials();
    let trials = match mode {
        Mode::Deny => total.div_ceil(2),
        Mode::Defer => total / 2,
    };
    let seed = seed();
    eprintln!(
        "soak {}: seed {seed:#x} (MOSC_GUARD_SOAK_SEED={seed:#x} replays the same choices), {trials} trials, {} at once",
        mode.name(),
        concurrency()
    );
    let cluster = Cluster::seed(0, SimConfig::fast())
        .await
        .expect("seed cluster");
    let ports = (
        free_port().expect("free port"),
        free_port().expect("free port"),
    );
    let guard = BIN
        .serve(&cluster.cp)
        .port(ports.0)
        .metrics_port(ports.1)
        .args(&mode.args())
        .start()
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("validating webhook registered");
    if mode == Mode::Defer {
        register_mutating_webhook(&cluster.cp, &guard)
            .await
            .expect("mutating webhook registered");
    }
    let soak = Soak {
        mode,
        seed,
        cluster,
        guard: tokio::sync::Mutex::new(guard),
        killed_logs: Mutex::new(Vec::new()),
        ports,
        chaos: tokio::sync::Mutex::new(()),
        guard_epoch: AtomicU64::new(0),
        apiserver_epoch: AtomicU64::new(0),
        stats: Mutex::new(Stats::default()),
    };
    let mode_salt: u64 = match mode {
        Mode::Deny => 0x6465_6e79,
        Mode::Defer => 0x0064_6566_6572,
    };
    let budget = env_number("MOSC_GUARD_SOAK_BUDGET_SECS").map(Duration::from_secs);
    let begun = std::sync::atomic::AtomicUsize::new(0);
    futures::stream::iter(0..trials)
        .filter(|_| {
            // A time budget ends the run early; the summary counts the trials that ran.
            let go = budget.is_none_or(|b| started.elapsed() < b);
            if go {
                begun.fetch_add(1, Ordering::SeqCst);
            }
            std::future::ready(go)
        })
        .map(|i| {
            let trial = Trial {
                soak: &soak,
                index: i,
                pool: format!("t{i:04}"),
                nodes: (0..2 + (i % 2))
                    .map(|n| format!("t{i:04}-node-{n}"))
                    .collect(),
                held: BTreeSet::new(),
                rng: Rng(seed ^ mode_salt ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)),
                images: BTreeSet::new(),
                deleted: false,
                chaos_done: false,
                safe_since: None,
                log: Vec::new(),
                began: Instant::now(),
            };
            trial.run()
        })
        .buffer_unordered(concurrency())
        .collect::<Vec<()>>()
        .await;

    // Final sweep: no MachineOSConfig being deleted keeps the finalizer once everything
    // settled (a live one carries it by design in defer mode).
    let mut left = Vec::new();
    for _ in 0..60 {
        left = mco::list_all(&mco::moscs(soak.client()))
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.metadata.deletion_timestamp.is_some())
            .filter(|m| {
                m.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER)
            })
            .filter_map(|m| m.metadata.name)
            .collect();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let rejected = soak.cluster.sim.rejected_writes();
    let (guard_log, current_log) = {
        let guard = soak.guard.lock().await;
        (guard.log_tail(40), guard.log())
    };
    let stats = soak.stats.into_inner().unwrap_or_else(|p| p.into_inner());
    let killed_logs = soak
        .killed_logs
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let decisions = lines_naming(
        &stats.false_allow_pools,
        killed_logs.iter().chain([&current_log]),
    );
    let line = summary(mode, soak.seed, &stats, trials, started.elapsed());
    // One line a grep can find (`make soak` prints it in its summary).
    println!("{line}");
    assert!(
        left.is_empty(),
        "MachineOSConfigs keep {FINALIZER}: {left:?}"
    );
    assert_eq!(
        stats.false_allows, 0,
        "false allows: {line}\n{guard_log}\nthe guards' log lines naming those trials:\n{decisions}"
    );
    assert_eq!(stats.degraded, 0, "degraded pools: {line}\n{guard_log}");
    assert_eq!(
        stats.stranded, 0,
        "stranded finalizers: {line}\n{guard_log}"
    );
    assert_eq!(
        (stats.unsettled, stats.trial_errors),
        (0, 0),
        "trials that never settled or could not be set up: {line}\n{guard_log}"
    );
    assert_eq!(
        stats.liveness_violations, 0,
        "safe deletions not allowed within {LIVENESS_BOUND:?}: {line}\n{guard_log}"
    );
    assert_eq!(
        rejected,
        Vec::<String>::new(),
        "the simulator wrote objects the API server rejected"
    );
    assert_eq!(
        stats.trials as usize + stats.trial_errors as usize,
        begun.load(Ordering::SeqCst)
    );
}

/// The lines of `logs` (oldest guard first) that name one of `pools`' objects (a trial's
/// MachineOSConfig, builds and nodes all start with its pool's name), the last 60 per pool.
fn lines_naming<'a>(pools: &BTreeSet<String>, logs: impl Iterator<Item = &'a String>) -> String {
    let logs: Vec<&String> = logs.collect();
    let mut out = String::new();
    for pool in pools {
        let lines: Vec<&str> = logs
            .iter()
            .flat_map(|log| log.lines())
            .filter(|l| l.contains(pool.as_str()))
            .collect();
        for l in &lines[lines.len().saturating_sub(60)..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_deny_mode() {
    soak(Mode::Deny).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_defer_mode() {
    soak(Mode::Defer).await;
}
