//! Race soak (issue 12, item 1): many randomized trials on one real control plane, the MCO
//! 4.20 simulator and the real mosc-guard process, interleaving what MCO does (targeting nodes,
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
//!
//! `MOSC_GUARD_SOAK_TRIALS` (default 16, split between the two modes), `MOSC_GUARD_SOAK_SEED`
//! (printed; the same seed replays the same choices, not the same timings),
//! `MOSC_GUARD_SOAK_CONCURRENCY` (trials at once, default 4), `MOSC_GUARD_SOAK_BUDGET_SECS`
//! (start no trial after this many seconds; the summary counts those that ran).
//!
//! The simulator runs at `SimConfig::fast()` (milliseconds, delete events handled 100 ms late):
//! the interleavings are under test, and hundreds of rollouts at the builder's real timing would
//! not fit a run.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use support::guard::{Guard, register_mutating_webhook, register_validating_webhook};
use support::mco::{
    self, CURRENT_IMAGE, DESIRED_IMAGE, LABEL_MOSC, STATE, STATE_DEGRADED, STATE_DONE, str_at,
};
use support::net::free_port;
use support::scenario::{Cluster, create_mosc, create_nodes, create_pool, rendered_config};
use support::simulator::SimConfig;

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";
/// How long a trial waits for its rollout to settle and its MachineOSConfig to go.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(180);
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

/// What the soak counts (one per test function).
#[derive(Default, Debug)]
struct Stats {
    trials: u64,
    deletions: u64,
    dry_runs: u64,
    real: u64,
    allowed: u64,
    deferred: u64,
    denied: u64,
    denied_needed: u64,
    failed_requests: u64,
    not_found: u64,
    safe_attempts: u64,
    false_allows: u64,
    raced_allows: u64,
    removals_checked: u64,
    false_denials: u64,
    raced_denials: u64,
    degraded: u64,
    stranded: u64,
    unsettled: u64,
    trial_errors: u64,
    across_guard_restart: u64,
    across_apiserver_restart: u64,
    guard_restarts: u64,
    apiserver_restarts: u64,
    denial_reasons: BTreeMap<String, u64>,
    false_denial_reasons: BTreeMap<String, u64>,
    failures: BTreeMap<String, u64>,
    details: Vec<String>,
}

/// One soak run: the cluster, the guard (restartable on the same ports) and the counters.
struct Soak {
    mode: Mode,
    seed: u64,
    cluster: Cluster,
    guard: tokio::sync::Mutex<Guard>,
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
        tokio::time::sleep(rng.millis(0, 2000)).await;
        let args = self.mode.args();
        let mut started = None;
        for _ in 0..3 {
            match Guard::start_on_ports(&self.cluster.cp, self.ports.0, self.ports.1, &args).await {
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

/// A node as one list showed it.
#[derive(Clone, Debug)]
struct NodeSeen {
    rv: String,
    desired: Option<String>,
    current: Option<String>,
    state: Option<String>,
}

fn annotation(node: &Node, key: &str) -> Option<String> {
    mco::node_annotation(node, key).map(str::to_owned)
}

/// A consistent list of the trial's nodes (one resourceVersion).
async fn read_nodes(
    client: &kube::Client,
    pool: &str,
) -> support::Result<BTreeMap<String, NodeSeen>> {
    let list = mco::nodes(client)
        .list(&ListParams::default().labels(&role_label(pool)))
        .await?;
    Ok(list
        .items
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                NodeSeen {
                    rv: n.metadata.resource_version.clone().unwrap_or_default(),
                    desired: annotation(n, DESIRED_IMAGE),
                    current: annotation(n, CURRENT_IMAGE),
                    state: annotation(n, STATE),
                },
            )
        })
        .collect())
}

/// What the oracle reads before and after a deletion.
#[derive(Clone, Debug)]
struct Snapshot {
    nodes: BTreeMap<String, NodeSeen>,
    mosc: Option<DynamicObject>,
    mosbs: Vec<DynamicObject>,
    pool: Option<DynamicObject>,
}

async fn snapshot(client: &kube::Client, pool: &str) -> support::Result<Snapshot> {
    let nodes = read_nodes(client, pool).await?;
    let mosbs = mco::mosbs(client)
        .list(&ListParams::default().labels(&format!("{LABEL_MOSC}={pool}")))
        .await?
        .items;
    let mosc = mco::moscs(client).get_opt(pool).await?;
    let pool = mco::mcps(client).get_opt(pool).await?;
    Ok(Snapshot {
        nodes,
        mosc,
        mosbs,
        pool,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Mosc(String),
    Mosb(String),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Mosc(n) => format!("machineosconfig/{n}"),
            Target::Mosb(n) => format!("machineosbuild/{n}"),
        }
    }
}

fn image_of(mosb: &DynamicObject) -> Option<String> {
    str_at(&mosb.data, &["status", "digestedImagePushSpec"]).map(str::to_owned)
}

fn mosc_current_image(mosc: &DynamicObject) -> Option<String> {
    str_at(&mosc.data, &["status", "currentImagePullSpec"]).map(str::to_owned)
}

impl Snapshot {
    /// The images a deletion of `target` would remove (README, "Policy semantics").
    fn images(&self, target: &Target) -> BTreeSet<String> {
        match target {
            Target::Mosc(_) => self
                .mosbs
                .iter()
                .filter_map(image_of)
                .chain(self.mosc.as_ref().and_then(mosc_current_image))
                .collect(),
            Target::Mosb(name) => self
                .mosbs
                .iter()
                .filter(|b| b.metadata.name.as_deref() == Some(name))
                .filter_map(image_of)
                .collect(),
        }
    }

    /// Nodes whose desiredImage is one of `images` and not reached yet.
    fn blocking(&self, images: &BTreeSet<String>) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| {
                n.desired
                    .as_ref()
                    .is_some_and(|d| images.contains(d) && n.current.as_ref() != Some(d))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The pool rule: not paused, its MachineOSConfig's current image one of `images`, a node
    /// not on it yet (whatever the pool's conditions say).
    fn pool_rolling(&self, images: &BTreeSet<String>) -> bool {
        let Some(pool) = &self.pool else { return false };
        let paused = pool
            .data
            .get("spec")
            .and_then(|s| s.get("paused"))
            .and_then(Value::as_bool)
            == Some(true);
        let Some(image) = self.mosc.as_ref().and_then(mosc_current_image) else {
            return false;
        };
        !paused
            && images.contains(&image)
            && self
                .nodes
                .values()
                .any(|n| n.current.as_deref() != Some(image.as_str()))
    }

    fn safe(&self, target: &Target) -> bool {
        let images = self.images(target);
        self.blocking(&images).is_empty() && !self.pool_rolling(&images)
    }

    fn mosc_has_finalizer(&self) -> bool {
        self.mosc.as_ref().is_some_and(|m| {
            m.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        })
    }
}

/// Blocking nodes of `before` that `after` still shows unchanged (same resourceVersion).
fn still_blocking(
    before: &BTreeMap<String, NodeSeen>,
    blocking: &[String],
    after: &BTreeMap<String, NodeSeen>,
) -> Vec<String> {
    blocking
        .iter()
        .filter(|n| matches!((before.get(*n), after.get(*n)), (Some(b), Some(a)) if a.rv == b.rv))
        .cloned()
        .collect()
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

/// A denial message reduced to its kind (names, digests and numbers dropped).
fn bucket(message: &str) -> String {
    let kind = if message.contains("failed calling webhook") {
        let why = if message.contains("connection refused") {
            "connection refused"
        } else if message.contains("deadline exceeded") || message.contains("timeout") {
            "timeout"
        } else {
            "other"
        };
        format!("failed calling webhook ({why})")
    } else if message.contains("could not verify") {
        let why = message
            .split("could not verify that no node still needs its images (")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap_or("?");
        let why: String = why
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .take(80)
            .collect();
        format!("could not verify ({why})")
    } else if message.contains("cannot be deleted yet") && message.contains("still need") {
        "a node still needs an image".to_owned()
    } else if message.contains("cannot be deleted yet") && message.contains("rolling out") {
        "the pool is still rolling out an image".to_owned()
    } else {
        message
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .take(80)
            .collect()
    };
    if message.contains("does not carry the finalizer") {
        format!("{kind}; no finalizer yet, so not deferred")
    } else {
        kind
    }
}

/// The last 8 hex digits of an image's digest, for the trial log.
fn short(image: Option<&str>) -> String {
    image.map_or_else(
        || "none".to_owned(),
        |i| i[i.len().saturating_sub(8)..].to_owned(),
    )
}

fn role_label(pool: &str) -> String {
    format!("node-role.kubernetes.io/{pool}")
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

impl<'a> Trial<'a> {
    fn client(&self) -> &'a kube::Client {
        self.soak.client()
    }

    fn note(&self, what: String) {
        tracing::warn!(
            "soak {} trial {}: {what}",
            self.soak.mode.name(),
            self.index
        );
        self.soak.stats(|s| {
            if s.details.len() < 50 {
                s.details
                    .push(format!("trial {} ({}): {what}", self.index, self.pool));
            }
        });
    }

    /// Creates the trial's pool, nodes and MachineOSConfig; creates only what is missing, so a
    /// retry after a failure (an API-server restart mid-setup) completes what is there.
    async fn setup(&mut self) -> support::Result<()> {
        let client = self.client();
        let max_unavailable = 1 + self.rng.below(2) as u32;
        if mco::mcps(client).get_opt(&self.pool).await?.is_none() {
            create_pool(client, &self.pool, &role_label(&self.pool), max_unavailable).await?;
        }
        for node in &self.nodes {
            if mco::nodes(client).get_opt(node).await?.is_none() {
                create_nodes(
                    client,
                    std::slice::from_ref(node),
                    &role_label(&self.pool),
                    &rendered_config(&self.pool),
                )
                .await?;
            }
        }
        if mco::moscs(client).get_opt(&self.pool).await?.is_none() {
            // Some nodes are slow from the start: caught mid-update once targeted.
            for node in self.nodes.clone() {
                if self.rng.chance(30) {
                    self.hold(&node);
                }
            }
            create_mosc(client, &self.pool, &self.soak.cluster.push_spec()).await?;
        }
        Ok(())
    }

    /// Records a step of the trial (shown when the trial goes wrong).
    fn act(&mut self, what: impl Into<String>) {
        let at = self.began.elapsed().as_secs_f64();
        self.log.push(format!("{at:.2}s {}", what.into()));
    }

    fn hold(&mut self, node: &str) {
        self.act(format!("hold {node}"));
        self.soak.cluster.sim.hold(node);
        self.held.insert(node.to_owned());
    }

    fn release(&mut self, node: &str) {
        self.act(format!("release {node}"));
        self.soak.cluster.sim.release(node);
        self.held.remove(node);
    }

    fn release_all(&mut self) {
        if !self.held.is_empty() {
            self.act("release all");
        }
        for node in std::mem::take(&mut self.held) {
            self.soak.cluster.sim.release(&node);
        }
    }

    /// One deletion through the API server, judged by the oracle.
    async fn attempt(&mut self, choose_mosb: bool, dry_run: bool) -> Attempt {
        let client = self.client();
        let Ok(before) = snapshot(client, &self.pool).await else {
            return Attempt::Skipped;
        };
        self.images.extend(before.mosbs.iter().filter_map(image_of));
        let built: Vec<String> = before
            .mosbs
            .iter()
            .filter(|b| b.metadata.deletion_timestamp.is_none())
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        let target = if choose_mosb && !built.is_empty() {
            Target::Mosb(built[self.rng.below(built.len() as u64) as usize].clone())
        } else {
            Target::Mosc(self.pool.clone())
        };
        let images = before.images(&target);
        let blocking = before.blocking(&images);
        let safe_before = blocking.is_empty() && !before.pool_rolling(&images);
        // Defer mode accepts a MachineOSConfig carrying the finalizer by design; its removal is
        // judged when it happens.
        let deferrable = self.soak.mode == Mode::Defer
            && matches!(target, Target::Mosc(_))
            && before.mosc_has_finalizer();
        // A build of this config running: an allowed deletion races its rollout (README, Limits).
        let building: Vec<String> = before
            .mosbs
            .iter()
            .filter(|b| {
                b.metadata.deletion_timestamp.is_none()
                    && !["Succeeded", "Failed", "Interrupted"]
                        .iter()
                        .any(|c| mco::condition_true(b, c))
            })
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        let answer = delete(client, &target, dry_run).await;
        let verdict = match &answer {
            Answer::Allowed => "allowed".to_owned(),
            Answer::Denied(m) => format!("denied ({})", bucket(m)),
            Answer::NotFound => "not found".to_owned(),
            Answer::Failed(e) => format!("failed ({})", e.chars().take(60).collect::<String>()),
        };
        self.act(format!(
            "{}delete {} -> {verdict}; before: blocking {blocking:?}, pool rolling {}, building {building:?}, nodes {:?}",
            if dry_run { "dry-run " } else { "" },
            target.describe(),
            before.pool_rolling(&images),
            before
                .nodes
                .iter()
                .map(|(n, s)| format!(
                    "{n}: {}/{}->{}",
                    s.state.as_deref().unwrap_or("-"),
                    short(s.current.as_deref()),
                    short(s.desired.as_deref())
                ))
                .collect::<Vec<_>>()
        ));
        let after = snapshot(client, &self.pool).await.ok();
        self.soak.stats(|s| {
            s.deletions += 1;
            if dry_run {
                s.dry_runs += 1;
            } else {
                s.real += 1;
            }
            if safe_before {
                s.safe_attempts += 1;
            }
        });
        let what = format!(
            "{}delete {}",
            if dry_run { "dry-run " } else { "" },
            target.describe()
        );
        match answer {
            Answer::Allowed if deferrable => {
                self.soak.stats(|s| {
                    if blocking.is_empty() {
                        s.allowed += 1;
                    } else {
                        s.deferred += 1;
                    }
                });
                if dry_run {
                    Attempt::Allowed
                } else {
                    Attempt::Accepted
                }
            }
            Answer::Allowed => {
                self.soak.stats(|s| s.allowed += 1);
                if !blocking.is_empty() {
                    let stuck = after
                        .as_ref()
                        .map(|a| still_blocking(&before.nodes, &blocking, &a.nodes))
                        .unwrap_or_default();
                    if stuck.is_empty() {
                        self.soak.stats(|s| s.raced_allows += 1);
                    } else {
                        self.soak.stats(|s| s.false_allows += 1);
                        self.note(format!(
                            "FALSE ALLOW: {what} allowed while {stuck:?} needed {images:?} \
                             (unchanged before and after the request): {:?}",
                            before.nodes
                        ));
                    }
                }
                Attempt::Allowed
            }
            Answer::Denied(message) => {
                let kind = bucket(&message);
                let safe_after = after.as_ref().is_some_and(|a| a.safe(&target));
                self.soak.stats(|s| {
                    s.denied += 1;
                    *s.denial_reasons.entry(kind.clone()).or_default() += 1;
                    if !safe_before {
                        s.denied_needed += 1;
                    } else if safe_after {
                        s.false_denials += 1;
                        *s.false_denial_reasons.entry(kind.clone()).or_default() += 1;
                    } else {
                        s.raced_denials += 1;
                    }
                });
                Attempt::Denied
            }
            Answer::NotFound => {
                self.soak.stats(|s| s.not_found += 1);
                Attempt::Skipped
            }
            Answer::Failed(e) => {
                let kind: String = e
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .take(90)
                    .collect();
                self.soak.stats(|s| {
                    s.failed_requests += 1;
                    *s.failures.entry(kind).or_default() += 1;
                });
                Attempt::Skipped
            }
        }
    }

    /// Admin: a new Containerfile, so MCO builds and rolls out a new image.
    async fn update_mosc(&mut self) {
        self.act("update the MachineOSConfig's Containerfile (a new build)");
        let n = self.rng.next();
        let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch",
            "content": format!("FROM configs AS final\nRUN echo {n:016x}\n")}]}});
        let _ = mco::moscs(self.client())
            .patch(&self.pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }

    /// A new rendered MachineConfig for the pool (what the render controller does on a change).
    async fn render(&mut self) {
        self.act("new rendered config for the pool (a new build)");
        let rendered = format!(
            "rendered-{}-{:016x}{:016x}",
            self.pool,
            self.rng.next(),
            self.rng.next()
        );
        let patch = json!({"spec": {"configuration": {"name": rendered}}});
        let _ = mco::mcps(self.client())
            .patch(&self.pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }

    /// This trial's fault, if it has one and has not had it yet.
    async fn chaos(&mut self) {
        if std::mem::replace(&mut self.chaos_done, true) {
            return;
        }
        match self.index % CHAOS_PERIOD {
            3 => self.soak.restart_guard(&mut self.rng).await,
            6 => self.soak.restart_apiserver(&mut self.rng).await,
            _ => {}
        }
    }

    /// The random middle of a trial: MCO's progress (held and released nodes, new builds,
    /// new rendered configs) interleaved with deletions; possibly a restart.
    async fn interleave(&mut self) {
        let steps = 3 + self.rng.below(8);
        let chaos_at = self.rng.below(steps);
        for step in 0..steps {
            if step == chaos_at {
                self.chaos().await;
            }
            tokio::time::sleep(self.rng.millis(0, 1200)).await;
            let roll = self.rng.below(100);
            if roll < 20 {
                let node = self.nodes[self.rng.below(self.nodes.len() as u64) as usize].clone();
                self.hold(&node);
            } else if roll < 38 {
                let held: Vec<String> = self.held.iter().cloned().collect();
                if !held.is_empty() {
                    let node = held[self.rng.below(held.len() as u64) as usize].clone();
                    self.release(&node);
                }
            } else if roll < 46 {
                self.update_mosc().await;
            } else if roll < 50 {
                self.render().await;
            } else if roll < 58 {
                tokio::time::sleep(self.rng.millis(1500, 4000)).await;
            } else {
                let mosb = self.rng.chance(40);
                let dry_run = self.rng.chance(75);
                match self.attempt(mosb, dry_run).await {
                    Attempt::Allowed if !dry_run && !mosb => {
                        self.deleted = true;
                        return;
                    }
                    Attempt::Accepted => {
                        self.deleted = true;
                        return;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Deletes the MachineOSConfig for real until the guard lets it (deny: once the rollout
    /// settles) or accepts it (defer), releasing held nodes at random moments meanwhile.
    async fn delete_until_accepted(&mut self) -> bool {
        let started = Instant::now();
        while started.elapsed() < SETTLE_TIMEOUT {
            if !self.held.is_empty() && self.rng.chance(40) {
                let node = self.held.iter().next().cloned().unwrap_or_default();
                self.release(&node);
            }
            match self.attempt(false, false).await {
                Attempt::Allowed | Attempt::Accepted => return true,
                Attempt::Skipped
                    if mco::moscs(self.client())
                        .get_opt(&self.pool)
                        .await
                        .is_ok_and(|m| m.is_none()) =>
                {
                    return true;
                }
                _ => {}
            }
            tokio::time::sleep(self.rng.millis(200, 900)).await;
            if started.elapsed() > Duration::from_secs(20) {
                self.release_all();
            }
        }
        false
    }

    /// Watches the MachineOSConfig until it is gone (or the timeout), releasing held nodes at
    /// random moments, and judges its removal: a node blocking, unchanged, from a list read
    /// before the last sighting of the object to one read after it was first seen gone, means
    /// it was removed while that node needed its image.
    async fn watch_removal(&mut self) -> bool {
        let client = self.client();
        let started = Instant::now();
        let mut before_last_sighting: Option<Snapshot> = None;
        while started.elapsed() < SETTLE_TIMEOUT {
            if !self.held.is_empty() && self.rng.chance(15) {
                let node = self.held.iter().next().cloned().unwrap_or_default();
                self.release(&node);
            }
            if started.elapsed() > Duration::from_secs(15) {
                self.release_all();
            }
            // Node list first, then the object: a sighting bounds the removal from below.
            let Ok(snap) = snapshot(client, &self.pool).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mosc = match mco::moscs(client).get_opt(&self.pool).await {
                Ok(m) => m,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            self.images.extend(snap.mosbs.iter().filter_map(image_of));
            if let Some(m) = &mosc {
                self.images.extend(mosc_current_image(m));
                before_last_sighting = Some(snap);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // Gone: one more node list, read after the object was seen gone.
            let after = loop {
                match read_nodes(client, &self.pool).await {
                    Ok(n) => break n,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            self.soak.stats(|s| s.removals_checked += 1);
            if let Some(before) = before_last_sighting {
                let blocking = before.blocking(&self.images);
                let stuck = still_blocking(&before.nodes, &blocking, &after);
                if !stuck.is_empty() {
                    self.soak.stats(|s| s.false_allows += 1);
                    self.note(format!(
                        "FALSE ALLOW: machineosconfig/{} removed while {stuck:?} needed one of \
                         {:?} (unchanged across the removal)",
                        self.pool, self.images
                    ));
                }
            }
            return true;
        }
        false
    }

    /// Waits until every node of the pool is Done without image annotations (the pool left
    /// image mode); stops early on a Degraded node.
    async fn wait_reverted(&self) -> bool {
        let started = Instant::now();
        while started.elapsed() < SETTLE_TIMEOUT {
            if let Ok(nodes) = read_nodes(self.client(), &self.pool).await {
                if nodes
                    .values()
                    .any(|n| n.state.as_deref() == Some(STATE_DEGRADED))
                {
                    return false;
                }
                if nodes.values().all(|n| {
                    n.state.as_deref() == Some(STATE_DONE)
                        && n.desired.is_none()
                        && n.current.is_none()
                }) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// Degraded nodes, or the pool's Degraded/NodeDegraded condition.
    async fn degraded(&self) -> Option<String> {
        let nodes = read_nodes(self.client(), &self.pool).await.ok()?;
        let bad: Vec<&String> = nodes
            .iter()
            .filter(|(_, n)| n.state.as_deref() == Some(STATE_DEGRADED))
            .map(|(name, _)| name)
            .collect();
        let pool = mco::mcps(self.client()).get_opt(&self.pool).await.ok()??;
        let pool_bad =
            mco::condition_true(&pool, "Degraded") || mco::condition_true(&pool, "NodeDegraded");
        let reasons: Vec<String> = mco::nodes(self.client())
            .list(&ListParams::default().labels(&role_label(&self.pool)))
            .await
            .ok()?
            .items
            .iter()
            .filter_map(|n| annotation(n, mco::REASON))
            .map(|r| {
                r.chars()
                    .rev()
                    .take(160)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect()
            })
            .collect();
        (pool_bad || !bad.is_empty())
            .then(|| format!("degraded nodes {bad:?} ({reasons:?}), pool degraded {pool_bad}"))
    }

    async fn cleanup(&self) {
        for _ in 0..20 {
            let mut ok = true;
            for node in &self.nodes {
                match mco::nodes(self.client())
                    .delete(node, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(_) => ok = false,
                }
            }
            match mco::mcps(self.client())
                .delete(&self.pool, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(_) => ok = false,
            }
            if ok {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn run(mut self) {
        let epochs = |soak: &Soak| {
            (
                soak.guard_epoch.load(Ordering::SeqCst),
                soak.apiserver_epoch.load(Ordering::SeqCst),
            )
        };
        let (g0, a0) = epochs(self.soak);
        let mut setup_ok = false;
        for _ in 0..5 {
            match self.setup().await {
                Ok(()) => {
                    setup_ok = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!("soak trial {}: setup: {e}", self.index);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
        if !setup_ok {
            self.soak.stats(|s| s.trial_errors += 1);
            self.note("setup failed five times".into());
            self.cleanup().await;
            return;
        }
        self.interleave().await;
        // A trial that ended its steps early (a real deletion) has its fault now, while its
        // deletion is decided or deferred.
        self.chaos().await;
        if !self.deleted {
            self.deleted = self.delete_until_accepted().await;
        }
        let gone = self.deleted && self.watch_removal().await;
        self.release_all();
        let reverted = gone && self.wait_reverted().await;
        if let Some(why) = self.degraded().await {
            self.soak.stats(|s| s.degraded += 1);
            self.note(format!("DEGRADED: {why}"));
        } else if !reverted {
            self.soak.stats(|s| s.unsettled += 1);
            let state = snapshot(self.client(), &self.pool)
                .await
                .map(|s| {
                    let pool = s.pool.map(|p| p.data.get("status").cloned());
                    let mosc = s.mosc.map(|m| (m.metadata, m.data.get("status").cloned()));
                    let builds: Vec<_> = s
                        .mosbs
                        .iter()
                        .map(|b| (b.metadata.name.clone(), image_of(b)))
                        .collect();
                    format!(
                        "nodes {:?}; pool status {pool:?}; mosc {mosc:?}; builds {builds:?}",
                        s.nodes
                    )
                })
                .unwrap_or_else(|e| e.to_string());
            self.note(format!(
                "did not settle within {SETTLE_TIMEOUT:?} (deleted {}, gone {gone}): {state}",
                self.deleted
            ));
        }
        // Stranded: the object must be gone, and nothing may keep our finalizer.
        if let Ok(Some(m)) = mco::moscs(self.client()).get_opt(&self.pool).await
            && m.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        {
            self.soak.stats(|s| s.stranded += 1);
            self.note(format!(
                "STRANDED: machineosconfig/{} keeps {FINALIZER} (deletionTimestamp {:?})",
                self.pool, m.metadata.deletion_timestamp
            ));
        }
        let (g1, a1) = epochs(self.soak);
        self.soak.stats(|s| {
            s.trials += 1;
            if g0 != g1 || g0 % 2 == 1 {
                s.across_guard_restart += 1;
            }
            if a0 != a1 || a0 % 2 == 1 {
                s.across_apiserver_restart += 1;
            }
        });
        self.cleanup().await;
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn summary(mode: Mode, seed: u64, s: &Stats, planned: usize, took: Duration) -> String {
    let mut out = format!(
        "soak {}: trials={} false_allows={} degraded={} false_denials={} ({:.2}% of {} safe attempts) \
         stranded={} | seed={seed:#x} deletions={} (dry-run {}, real {}) allowed={} deferred={} \
         denied={} (needed {}, false {}, raced {}) raced_allows={} removals_checked={} \
         failed_requests={} not_found={} unsettled={} trial_errors={} guard_restarts={} \
         (trials across {}) apiserver_restarts={} (trials across {}) planned={planned} wall={:.0}s",
        mode.name(),
        s.trials,
        s.false_allows,
        s.degraded,
        s.false_denials,
        percent(s.false_denials, s.safe_attempts),
        s.safe_attempts,
        s.stranded,
        s.deletions,
        s.dry_runs,
        s.real,
        s.allowed,
        s.deferred,
        s.denied,
        s.denied_needed,
        s.false_denials,
        s.raced_denials,
        s.raced_allows,
        s.removals_checked,
        s.failed_requests,
        s.not_found,
        s.unsettled,
        s.trial_errors,
        s.guard_restarts,
        s.across_guard_restart,
        s.apiserver_restarts,
        s.across_apiserver_restart,
        took.as_secs_f64(),
    );
    for (title, map) in [
        ("false-denial reasons", &s.false_denial_reasons),
        ("denial reasons", &s.denial_reasons),
        ("failed requests", &s.failures),
    ] {
        for (reason, n) in map {
            out.push_str(&format!("\n  {title}: {n} x {reason}"));
        }
    }
    for d in &s.details {
        out.push_str(&format!("\n  note: {d}"));
    }
    out
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
    let guard = Guard::start_on_ports(&cluster.cp, ports.0, ports.1, &mode.args())
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
    let guard_log = soak.guard.lock().await.log_tail(40);
    let stats = soak.stats.into_inner().unwrap_or_else(|p| p.into_inner());
    let line = summary(mode, soak.seed, &stats, trials, started.elapsed());
    // One line a grep can find (`make soak` prints it in its summary).
    println!("{line}");
    assert!(
        left.is_empty(),
        "MachineOSConfigs keep {FINALIZER}: {left:?}"
    );
    assert_eq!(stats.false_allows, 0, "false allows: {line}\n{guard_log}");
    assert_eq!(stats.degraded, 0, "degraded pools: {line}\n{guard_log}");
    assert_eq!(
        stats.stranded, 0,
        "stranded finalizers: {line}\n{guard_log}"
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_deny_mode() {
    soak(Mode::Deny).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_defer_mode() {
    soak(Mode::Defer).await;
}
