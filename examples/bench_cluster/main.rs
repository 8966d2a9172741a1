//! `make bench-cluster`: mosc-guard against a real kube-apiserver holding N realistic nodes
//! (BENCHMARKS.md, "Cluster benchmark").
//!
//! Nodes are `testkit::realistic`: OpenShift workers with 20 labels, 30 annotations (OVN's JSON ones, the
//! machine API's, MCO's), a status with conditions, addresses and 30 images; all in one
//! layered pool settled on one image. While it measures, a churn task updates node status at
//! `CHURN` updates per node per hour (kubelets report about every 5 minutes: 12), as a live
//! cluster does. In the same run it measures, through the API server (server-side dry-run
//! deletions of the MachineOSConfig, one at a time):
//!
//! - no webhook at all (the floor);
//! - an allow-all webhook: `mosc-guard serve --from-dir` over an empty directory, the same
//!   binary, TLS and admission code, whose every decision is an instant allow;
//! - the guard (release build, the rendered webhook configuration): time to ready, RSS idle,
//!   allow latency (settled pool: cache allow, then the confirming read), `CONCURRENT` allows
//!   at once (their p50 and max, the p50's ratio to the single allow's in the same run, and
//!   how many come back "could not verify"), deny latency (one node mid-update: denied from
//!   the cache), and peak RSS.
//!
//! Environment: `NODES` (default 5000), `CHURN` (12), `SAMPLES` (200 deny/baseline samples,
//! half as many allows), `CONCURRENT` (4), `ROUNDS` (10 rounds of concurrent allows),
//! `GUARD_ARGS` (extra `serve` arguments, e.g. `--fence-wait-ms=0`). `MOSC_GUARD_BIN` selects
//! the guard binary (the Makefile passes the release build).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use testkit::Result;
use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco::{self, CURRENT_IMAGE, STATE};
use testkit::realistic;
use testkit::scenario::create_pool;
use testkit::scenario::objects::{create_built_mosc, image};
use testkit::webhooks::register_validating_webhook;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() -> ExitCode {
    let runtime = match testkit::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench-cluster: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Creates `n` nodes, 32 requests at a time.
async fn create_nodes(client: &kube::Client, n: usize, image: &str) -> Result<()> {
    let nodes = mco::nodes(client);
    let started = Instant::now();
    let mut creates = futures::stream::iter(0..n)
        .map(|i| {
            let nodes = nodes.clone();
            let image = image.to_string();
            async move {
                let node = realistic::node(i, "worker", &image, &image, "Done");
                match nodes.create(&PostParams::default(), &node).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err::<(), testkit::Error>(e.into()),
                }
            }
        })
        .buffer_unordered(32);
    let mut done = 0usize;
    while let Some(result) = creates.next().await {
        result?;
        done += 1;
        if done.is_multiple_of(10_000) {
            eprintln!("  {done} nodes created ({:.0?})", started.elapsed());
        }
    }
    eprintln!("  {n} nodes created in {:.1?}", started.elapsed());
    Ok(())
}

/// Updates node status at `per_hour` updates per node per hour, spread evenly, until `stop`.
/// Returns how many updates were made.
fn start_churn(
    client: kube::Client,
    n: usize,
    per_hour: u64,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let rate = n as f64 * per_hour as f64 / 3600.0;
        if rate <= 0.0 {
            return;
        }
        let nodes = mco::nodes(&client);
        let interval = Duration::from_secs_f64(1.0 / rate);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next = 0usize;
        let in_flight = Arc::new(tokio::sync::Semaphore::new(16));
        while !stop.load(Ordering::Relaxed) {
            tick.tick().await;
            // Spread over the nodes in a fixed stride, as independent kubelets would.
            next = (next + 7919) % n;
            let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                return;
            };
            let (nodes, count) = (nodes.clone(), Arc::clone(&count));
            let name = realistic::node_name(next);
            tokio::spawn(async move {
                let now = chrono_now();
                let patch = json!({"status": {"conditions": realistic::conditions(&now)}});
                if nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                    .is_ok()
                {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
        }
    })
}

/// RFC 3339 UTC time now, to the second.
fn chrono_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How a dry-run deletion came back.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Allowed,
    Denied,
    Unverified,
}

async fn dry_run_delete(client: &kube::Client) -> Result<(Duration, Answer)> {
    let started = Instant::now();
    let result = mco::moscs(client)
        .delete(
            "worker",
            &DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            },
        )
        .await;
    let took = started.elapsed();
    match result {
        Ok(_) => Ok((took, Answer::Allowed)),
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("could not verify") => {
            Ok((took, Answer::Unverified))
        }
        Err(kube::Error::Api(s)) if s.code == 403 => Ok((took, Answer::Denied)),
        Err(e) => Err(e.into()),
    }
}

/// Latencies of `samples` sequential dry-run deletions, and how they were answered.
async fn measure(client: &kube::Client, samples: u64) -> Result<(Vec<Duration>, [usize; 3])> {
    let mut latencies = Vec::new();
    let mut answers = [0usize; 3];
    for _ in 0..samples {
        let (took, answer) = dry_run_delete(client).await?;
        latencies.push(took);
        answers[answer as usize] += 1;
    }
    latencies.sort();
    Ok((latencies, answers))
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// User + system CPU seconds `pid` has used (from /proc/PID/stat, in clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at state (field 3).
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// VmRSS and VmHWM (peak) of `pid`, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let (rss, peak, _) = memory_mib(pid);
    (rss, peak)
}

/// VmRSS, VmHWM (peak) and RssFile (the binary's mapped pages, part of VmRSS) of `pid`, in MiB.
fn memory_mib(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"), field("RssFile:"))
}

async fn run() -> Result<()> {
    // Fail before starting any server when the product binary is missing.
    let bin = GuardBin::from_env()?;
    let n = env_or("NODES", 5000) as usize;
    let churn = env_or("CHURN", 12);
    let samples = env_or("SAMPLES", 200);
    let concurrent = env_or("CONCURRENT", 4) as usize;
    let rounds = env_or("ROUNDS", 10);
    let guard_args: Vec<String> = std::env::var("GUARD_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if n == 0 {
        return Err(
            "NODES must be at least 1 (one of them is put mid-update for the denials)".into(),
        );
    }
    eprintln!(
        "bench-cluster: {n} nodes, churn {churn}/node/hour, {samples} samples, guard args {guard_args:?}"
    );

    let cp = ControlPlane::start_with_etcd_args(&["--quota-backend-bytes=8589934592"]).await?;
    let client = cp.client();
    let img = image("5a");
    create_pool(&client, "worker", "node-role.kubernetes.io/worker", 1).await?;
    create_built_mosc(&client, "worker", &img).await?;
    create_nodes(&client, n, &img).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let churned = Arc::new(AtomicU64::new(0));
    let churn_task = start_churn(
        client.clone(),
        n,
        churn,
        Arc::clone(&stop),
        Arc::clone(&churned),
    );
    let churn_started = Instant::now();

    // 1. No webhook.
    let (none, _) = measure(&client, samples).await?;

    // 2. The allow-all webhook: same binary and TLS code, an empty snapshot.
    let empty = tempfile::tempdir()?;
    let empty_dir = empty.path().to_string_lossy().to_string();
    let allow_all = bin
        .serve_offline(cp.pki())
        .args(&["--from-dir", &empty_dir])
        .start()
        .await?;
    register_validating_webhook(&cp, &allow_all).await?;
    let (baseline, base_answers) = measure(&client, samples).await?;
    if base_answers[Answer::Allowed as usize] as u64 != samples {
        return Err(format!(
            "the allow-all webhook did not allow every deletion: {base_answers:?}"
        )
        .into());
    }

    // 3. The guard.
    let args: Vec<&str> = guard_args.iter().map(String::as_str).collect();
    let spawned = Instant::now();
    let guard = bin
        .serve(&cp)
        .args(&args)
        .ready_timeout(Duration::from_secs(300))
        .start()
        .await?;
    let ready = spawned.elapsed();
    register_validating_webhook(&cp, &guard).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // CPU while idle: applying node watch events at the churn rate.
    let (cpu_before, idle_from) = (cpu_seconds(guard.pid()), Instant::now());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_cpu = (cpu_seconds(guard.pid()) - cpu_before) / idle_from.elapsed().as_secs_f64();
    let (idle, _, idle_file) = memory_mib(guard.pid());

    let (allow, allow_answers) = measure(&client, samples / 2).await?;
    let (after_allows, _) = rss_mib(guard.pid());

    let mut unverified = 0usize;
    let mut not_allowed = 0usize;
    let mut together = Vec::new();
    for _ in 0..rounds {
        let answers =
            futures::future::join_all((0..concurrent).map(|_| dry_run_delete(&client))).await;
        for answer in answers {
            let (took, answer) = answer?;
            together.push(took);
            match answer {
                Answer::Allowed => {}
                Answer::Unverified => unverified += 1,
                Answer::Denied => not_allowed += 1,
            }
        }
    }
    together.sort();
    let (_, peak) = rss_mib(guard.pid());

    // One node mid-update to the image: every deletion is denied from the cache.
    let old = image("4b");
    mco::nodes(&client)
        .patch(
            &realistic::node_name(0),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {CURRENT_IMAGE: old, STATE: "Working"}}}),
            ),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (deny, deny_answers) = measure(&client, samples).await?;
    let (end, peak_end) = rss_mib(guard.pid());
    let sources = (
        guard
            .metric("mosc_guard_confirmation_nodes_total{source=\"cache\"}")
            .await,
        guard
            .metric("mosc_guard_confirmation_nodes_total{source=\"list\"}")
            .await,
    );

    stop.store(true, Ordering::Relaxed);
    churn_task.abort();
    let churn_rate = churned.load(Ordering::Relaxed) as f64 / churn_started.elapsed().as_secs_f64();

    println!();
    println!(
        "bench-cluster: {n} nodes, node status updates {churn_rate:.1}/s (target {:.1}/s)",
        n as f64 * churn as f64 / 3600.0
    );
    println!("| measure | value |");
    println!("|---|---|");
    println!("| guard ready after start | {:.2} s |", ready.as_secs_f64());
    println!(
        "| guard RSS idle | {idle:.1} MiB (of which {idle_file:.1} MiB file-backed: the binary) |"
    );
    println!(
        "| guard CPU idle (applying node updates) | {:.1}% of a core |",
        idle_cpu * 100.0
    );
    println!(
        "| guard RSS after {} allows | {after_allows:.1} MiB |",
        samples / 2
    );
    println!(
        "| guard RSS peak ({concurrent} allows at once x {rounds}) | {peak:.1} MiB ({:.2}x idle) |",
        peak / idle
    );
    println!("| guard RSS at end / peak over the run | {end:.1} / {peak_end:.1} MiB |");
    println!(
        "| allow p50 / p99 (guard) | {} / {} |",
        ms(pct(&allow, 0.5)),
        ms(pct(&allow, 0.99))
    );
    println!(
        "| allows answered | {} allowed, {} denied, {} could not verify |",
        allow_answers[0], allow_answers[1], allow_answers[2]
    );
    println!(
        "| {concurrent} allows at once x {rounds}: p50 / max | {} / {} |",
        ms(pct(&together, 0.5)),
        ms(pct(&together, 1.0))
    );
    println!(
        "| {concurrent} allows at once p50 / single allow p50 | {:.2}x |",
        pct(&together, 0.5).as_secs_f64() / pct(&allow, 0.5).as_secs_f64()
    );
    println!(
        "| {concurrent} allows at once x {rounds}: not allowed | {not_allowed} denied, {unverified} could not verify |"
    );
    println!(
        "| deny p50 / p99 (guard) | {} / {} |",
        ms(pct(&deny, 0.5)),
        ms(pct(&deny, 0.99))
    );
    println!(
        "| denials answered | {} allowed, {} denied, {} could not verify |",
        deny_answers[0], deny_answers[1], deny_answers[2]
    );
    println!(
        "| allow-all webhook p50 / p99 | {} / {} |",
        ms(pct(&baseline, 0.5)),
        ms(pct(&baseline, 0.99))
    );
    println!(
        "| no webhook p50 / p99 | {} / {} |",
        ms(pct(&none, 0.5)),
        ms(pct(&none, 0.99))
    );
    println!(
        "| deny p50 / allow-all p50 | {:.2}x |",
        pct(&deny, 0.5).as_secs_f64() / pct(&baseline, 0.5).as_secs_f64()
    );
    println!(
        "| confirmations from the node cache / from a node list | {} / {} |",
        sources.0.unwrap_or(0.0),
        sources.1.unwrap_or(0.0)
    );
    drop(allow_all);
    Ok(())
}
