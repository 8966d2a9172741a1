//! `make bench-cluster`: mosc-guard against a real kube-apiserver holding N realistic nodes
//! (BENCHMARKS.md, "Cluster benchmark").
//!
//! Nodes are `testkit::realistic`: OpenShift workers with 20 labels, 30 annotations (OVN's JSON
//! ones, the machine API's, MCO's), a status with conditions, addresses and 30 images; all in
//! one layered pool settled on one image. While it measures, a churn task updates node status
//! at `CHURN` updates per node per hour (kubelets report about every 5 minutes: 12), as a live
//! cluster does. In the same run it measures, through the API server (server-side dry-run
//! deletions of the MachineOSConfig, one at a time unless said otherwise):
//!
//! - no webhook at all;
//! - an allow-all webhook: `mosc-guard serve --from-dir` over an empty directory, the same
//!   binary, TLS and admission code, whose every decision is an instant allow;
//! - the guard (release build, the rendered webhook configuration): time to ready, RSS and CPU
//!   idle, single allows (settled pool: the cache allows, the confirming read confirms),
//!   `CONCURRENT` allows at once for `ROUNDS` rounds, confirmed refusals (one node put
//!   mid-update: the cache refuses, the confirming read confirms), and peak RSS;
//! - interleaved with the guard's requests (one before each single request and each round), the
//!   consistent-read floor: the confirming read's own requests made by this benchmark
//!   ([`floor`]), reported per phase.
//!
//! - the registry audit: the nodes' image lives in a real registry behind TLS and token auth
//!   (`testkit::node_registry`), named by the ControllerConfig as on a cluster; the guard asks it
//!   every `REGISTRY_INTERVAL` seconds (default 10) throughout. The table shows the audit's
//!   checks and HTTP requests per distinct image and interval: one image, however many nodes.
//!   The MachineOSConfig's repository also holds `STRAY_TAGS` tags no build names (default
//!   20): the audit lists and resolves every tag of it each interval to count the images
//!   `prune` would delete, with the nodes' pull secret; the table shows that count and the
//!   tags it resolved, which grow with the tags, not the nodes. `REGISTRY_INTERVAL=0` runs the
//!   guard with the audit off (`--registry-check-interval=0`), to measure what it costs.
//!
//! It ends with one table: the guard's p50/p99 of each kind and their ratios to the floor's
//! measured in the same phase, the ratio of the concurrent allows' p99 to the single allows',
//! how every request was answered, and how busy the machine was with work other than this
//! benchmark while the guard was measured (a shared host's builds).
//!
//! Environment: `NODES` (default 5000), `CHURN` (12), `SAMPLES` (200 refusal and baseline
//! samples, half as many single allows), `CONCURRENT` (4), `ROUNDS` (100 rounds of concurrent
//! allows: the requests of one round share their fate, so a p99 over 400 of them is about the
//! slowest round in a hundred, as the single allows' p99 is about the slowest in a hundred),
//! `GUARD_ARGS` (extra `serve` arguments, e.g. `--fence-wait-ms=0`), `REGISTRY_INTERVAL` (10),
//! `STRAY_TAGS` (20). `MOSC_GUARD_BIN` selects
//! the guard binary (the Makefile passes the release build).

mod cluster;
mod floor;
mod phase;
mod process;
mod sample;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use testkit::Result;
use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::node_registry::SecureFace;
use testkit::registry::Registry;
use testkit::scenario::create_pool;
use testkit::scenario::objects::create_built_mosc;
use testkit::webhooks::register_validating_webhook;

use floor::NodeFence;
use phase::{Phase, measure_guard};
use process::Machine;
use sample::{Answer, measure};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// What to measure, from the environment.
pub struct Settings {
    nodes: usize,
    churn: u64,
    samples: u64,
    concurrent: usize,
    rounds: u64,
    guard_args: Vec<String>,
    registry_interval: u64,
    /// Tags pushed by hand to the MachineOSConfig's repository: what the audit counts.
    stray_tags: u64,
    /// The image the node put mid-update runs: in the benchmark's registry, never pushed (so
    /// the audit asks a registry on this machine, which answers missing).
    mid_update_image: String,
}

impl Settings {
    fn from_env() -> Self {
        Self {
            nodes: env_or("NODES", 5000) as usize,
            churn: env_or("CHURN", 12),
            samples: env_or("SAMPLES", 200),
            concurrent: env_or("CONCURRENT", 4) as usize,
            rounds: env_or("ROUNDS", 100),
            registry_interval: env_or("REGISTRY_INTERVAL", 10),
            stray_tags: env_or("STRAY_TAGS", 20),
            mid_update_image: String::new(),
            guard_args: std::env::var("GUARD_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        }
    }
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

async fn run() -> Result<()> {
    // Fail before starting any server when the product binary is missing.
    let bin = GuardBin::from_env()?;
    let mut s = Settings::from_env();
    let n = s.nodes;
    if n == 0 {
        return Err(
            "NODES must be at least 1 (one of them is put mid-update for the refusals)".into(),
        );
    }
    eprintln!(
        "bench-cluster: {n} nodes, churn {}/node/hour, {} samples, guard args {:?}",
        s.churn, s.samples, s.guard_args
    );

    let cp = ControlPlane::start_with_etcd_args(&["--quota-backend-bytes=8589934592"]).await?;
    let client = cp.client();
    // The nodes' image, in a registry as nodes reach it; the ControllerConfig says how.
    let open = Registry::start().await?;
    let face = SecureFace::over(&open).await?;
    face.install_controller_config(&client).await?;
    let digest = open
        .push_image(
            "openshift-machine-config-operator/ocb-image",
            "worker-bench",
        )
        .await?;
    // Tags no build names, each its own image: what `prune --apply --images` would delete.
    for i in 0..s.stray_tags {
        open.push_image(
            "openshift-machine-config-operator/ocb-image",
            &format!("stray-{i}"),
        )
        .await?;
    }
    let img = format!(
        "{}/openshift-machine-config-operator/ocb-image@{digest}",
        face.host()
    );
    s.mid_update_image = format!(
        "{}/openshift-machine-config-operator/ocb-image@sha256:{}",
        face.host(),
        "4b".repeat(32)
    );
    create_pool(&client, "worker", "node-role.kubernetes.io/worker", 1).await?;
    create_built_mosc(&client, "worker", &img).await?;
    cluster::create_nodes(&client, n, &img).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let churned = Arc::new(AtomicU64::new(0));
    let churn_task = cluster::start_churn(
        client.clone(),
        n,
        s.churn,
        Arc::clone(&stop),
        Arc::clone(&churned),
    );
    let churn_started = Instant::now();
    // The floor's node watch runs from here on, so every phase pays for it alike.
    let fence = NodeFence::start(&client).await?;

    // 1. No webhook.
    let none = measure(&client, s.samples).await?;

    // 2. The allow-all webhook: same binary and TLS code, an empty snapshot.
    let empty = tempfile::tempdir()?;
    let empty_dir = empty.path().to_string_lossy().to_string();
    let allow_all = bin
        .serve_offline(cp.pki())
        .args(&["--from-dir", &empty_dir])
        .start()
        .await?;
    register_validating_webhook(&cp, &allow_all).await?;
    let baseline = measure(&client, s.samples).await?;
    if baseline.answered(Answer::Allowed) != baseline.len() {
        return Err(format!(
            "the allow-all webhook did not allow every deletion: {}",
            baseline.answers()
        )
        .into());
    }

    // 3. The guard.
    let interval_arg = format!("--registry-check-interval={}", s.registry_interval);
    let mut args: Vec<&str> = s.guard_args.iter().map(String::as_str).collect();
    args.push(&interval_arg);
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
    let (cpu_before, idle_from) = (process::cpu_seconds(guard.pid()), Instant::now());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_cpu =
        (process::cpu_seconds(guard.pid()) - cpu_before) / idle_from.elapsed().as_secs_f64();
    let (idle, _, idle_file) = process::memory_mib(guard.pid());

    let (machine, load_before, measuring) =
        (Machine::now(), process::load_average(), Instant::now());
    let run = measure_guard(&client, &guard, &fence, &s).await?;
    let (busy, load_after) = (machine.since(), process::load_average());
    let measured_for = measuring.elapsed();
    let (end, peak_end, _) = process::memory_mib(guard.pid());
    let metrics = guard.metrics().await.unwrap_or_default();

    stop.store(true, Ordering::Relaxed);
    churn_task.abort();
    let churn_rate = churned.load(Ordering::Relaxed) as f64 / churn_started.elapsed().as_secs_f64();

    let series = |name: &str, label: &str, value: &str| {
        let series = format!("{name}{{{label}=\"{value}\"}}");
        testkit::probe::metric(&metrics, &series).unwrap_or(0.0)
    };
    let results = [
        "confirmed",
        "overturned",
        "refusal-confirmed",
        "refusal-overturned",
        "failed",
    ]
    .map(|r| {
        format!(
            "{r} {}",
            series("mosc_guard_confirmations_total", "result", r)
        )
    })
    .join(", ");
    let sources = ["cache", "list"]
        .map(|s| series("mosc_guard_confirmation_nodes_total", "source", s).to_string())
        .join(" / ");
    let unchanged =
        testkit::probe::metric(&metrics, "mosc_guard_confirmations_unchanged_total").unwrap_or(0.0);
    let (c, rounds) = (s.concurrent, s.rounds);
    let p99_ratio =
        run.together.guard.pct(0.99).as_secs_f64() / run.single.guard.pct(0.99).as_secs_f64();

    println!();
    println!(
        "bench-cluster: {n} nodes, {} cores, node status updates {churn_rate:.1}/s (asked {:.1}/s), \
         the guard measured for {:.0} s ending {}",
        process::cores(),
        n as f64 * s.churn as f64 / 3600.0,
        measured_for.as_secs_f64(),
        cluster::chrono_now(),
    );
    let row = |what: &str, value: String| println!("| {what} | {value} |");
    println!("| measure | value |");
    println!("|---|---|");
    row(
        "machine busy outside this benchmark while the guard was measured",
        format!(
            "{:.2} of {} cores, {:.2} stolen by the hypervisor (load average {load_before:.1} at the start, {load_after:.1} at the end, this benchmark included)",
            busy.elsewhere,
            process::cores(),
            busy.stolen
        ),
    );
    row(
        "guard ready after start",
        format!("{:.2} s", ready.as_secs_f64()),
    );
    row(
        "guard RSS idle",
        format!("{idle:.1} MiB (of which {idle_file:.1} MiB file-backed: the binary)"),
    );
    row(
        "guard CPU idle (applying node updates)",
        format!("{:.1}% of a core", idle_cpu * 100.0),
    );
    row(
        &format!(
            "guard RSS after {} single allows / peak after {c} at once x {rounds}",
            run.single.guard.len()
        ),
        format!(
            "{:.1} / {:.1} MiB ({:.2}x idle)",
            run.rss_after_single,
            run.peak_after_together,
            run.peak_after_together / idle
        ),
    );
    row(
        "guard RSS at end / peak over the run",
        format!("{end:.1} / {peak_end:.1} MiB"),
    );
    for (what, phase) in [
        (
            format!("single allows ({})", run.single.guard.len()),
            &run.single,
        ),
        (
            format!(
                "{c} allows at once ({} in {rounds} rounds)",
                run.together.guard.len()
            ),
            &run.together,
        ),
        (
            format!("confirmed refusals ({})", run.refusals.guard.len()),
            &run.refusals,
        ),
    ] {
        row(
            &format!(
                "{what}: p50 / p90 / p99; **the floor** (its reads issued at once) in the same phase ({} samples) p50 / p90 / p99; **guard over floor at p90 / p99**; the floor with the node fence p50 / p90 / p99",
                phase.floor.len()
            ),
            phase.report(),
        );
        row(
            &format!(
                "{what}: mean time inside the guard (cached / wait / read / fresh); confirming reads it made (mean steps: lists / revision / catch-up; node lists)"
            ),
            phase.report_inside(),
        );
    }
    row(
        &format!("**{c} allows at once p99 / single allow p99**"),
        format!("**{p99_ratio:.2}x**"),
    );
    row(
        "answers: single allows; at once; refusals",
        format!(
            "{}; {}; {}",
            run.single.guard.answers(),
            run.together.guard.answers(),
            run.refusals.guard.answers()
        ),
    );
    row("guard confirmations by result", results);
    row(
        "confirmations' nodes from the node cache / from a node list",
        sources,
    );
    row(
        "confirming reads that showed exactly what the cached verdict read (no second evaluation)",
        format!("{unchanged:.0}"),
    );
    let audited_for = spawned.elapsed().as_secs_f64();
    if s.registry_interval == 0 {
        row("registry audit", "off (REGISTRY_INTERVAL=0)".to_string());
    } else {
        let checks = ["available", "missing", "unknown"]
            .map(|r| series("mosc_guard_registry_checks_total", "result", r));
        let requests =
            testkit::probe::metric(&metrics, "mosc_guard_registry_requests_total").unwrap_or(0.0);
        row(
            &format!(
                "registry audit over {audited_for:.0} s, one ask per image per {} s: distinct images needed (the pool's, and from the refusals on the mid-update node's, never pushed) / nodes; checks available / missing / unknown; HTTP requests (the checks' and the deletable images' listings)",
                s.registry_interval
            ),
            format!(
                "2 / {n}; {:.0} / {:.0} / {:.0}; {requests:.0}",
                checks[0], checks[1], checks[2]
            ),
        );
        let deletable = testkit::probe::metric(
            &metrics,
            "mosc_guard_deletable_images{machineosconfig=\"worker\"}",
        )
        .map_or("no count".to_string(), |n| format!("{n:.0}"));
        let tags = testkit::probe::metric(&metrics, "mosc_guard_registry_tags_resolved_total")
            .unwrap_or(0.0);
        row(
            &format!(
                "deletable images counted by the audit (tags pushed by hand, each its own image) / tags it resolved over {audited_for:.0} s, one listing per {} s",
                s.registry_interval
            ),
            format!("{deletable} (of {}) / {tags:.0}", s.stray_tags),
        );
    }
    row("allow-all webhook p50 / p99", baseline.p50_p99());
    row("no webhook p50 / p99", none.p50_p99());
    let phases = [&run.single, &run.together, &run.refusals];
    let worst = |ratio: fn(&Phase) -> f64| phases.into_iter().map(ratio).fold(0.0, f64::max);
    println!(
        "\nslowest confirmed verdict against the floor of its phase: p90 {:.2}x, p99 {:.2}x \
         (target <= 1.20x each); {c} at once against single allows, p99: {p99_ratio:.2}x",
        worst(Phase::p90_over_floor),
        worst(Phase::p99_over_floor),
    );
    drop(allow_all);
    drop(face);
    drop(open);
    Ok(())
}
