//! The guard's measurements, phase by phase (single allows, concurrent allows, confirmed
//! refusals): each request or round after a floor sample, so both see the same conditions, and
//! per phase what the guard's own histogram and the API server's request counts gained (the
//! time spent inside the guard, the confirming reads it made).

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use testkit::Result;
use testkit::guard::Guard;
use testkit::mco::{self, CURRENT_IMAGE, STATE};
use testkit::realistic;

use crate::Settings;
use crate::floor::{self, NodeFence};
use crate::process;
use crate::sample::{Latencies, dry_run_delete};

/// One kind of guard request, and the floor measured between them (one sample before each
/// request or round), so that both see the same conditions.
#[derive(Default)]
pub struct Phase {
    pub guard: Latencies,
    /// The guard's own reads issued at once (see [`floor`]): the floor the targets compare with.
    pub floor: Latencies,
    /// The same reads and then the node watch passing their fence.
    pub fenced: Latencies,
    /// Seconds the guard spent deciding, and decisions, in this phase (its own histogram);
    /// then the same for each of its decision phases ([`DECISION_PHASES`]) and each step of
    /// its confirming reads ([`READ_STEPS`]).
    pub in_guard: [(f64, f64); 9],
    /// Confirming reads the guard made in this phase (from the API server's request counts).
    pub guard_reads: f64,
}

impl Phase {
    /// One floor sample, taken just before a guard request or round.
    async fn floor_sample(&mut self, client: &kube::Client, fence: &NodeFence) -> Result<()> {
        let sample = floor::consistent_read(client, fence).await?;
        self.floor.add_time(sample.reads);
        self.fenced.add_time(sample.fenced);
        Ok(())
    }

    /// "guard p50 / p90 / p99; floor p50 / p90 / p99; guard over floor at p90 / p99; the
    /// fenced floor p50 / p90 / p99".
    pub fn report(&self) -> String {
        format!(
            "{}; {}; {}; {}",
            self.guard.percentiles(),
            self.floor.percentiles(),
            self.guard.over(&self.floor),
            self.fenced.percentiles(),
        )
    }

    /// "mean time in the guard (cached / wait / read / fresh); confirming reads and their mean
    /// steps (lists / revision / catch-up; node lists)".
    pub fn report_inside(&self) -> String {
        let mean_ms = |(seconds, n): (f64, f64)| {
            if n > 0.0 {
                format!("{:.1}", seconds / n * 1e3)
            } else {
                "-".to_string()
            }
        };
        let [total, rest @ ..] = self.in_guard;
        let (phases, steps) = rest.split_at(DECISION_PHASES.len());
        let node_lists = steps[READ_STEPS.len() - 1].1;
        format!(
            "{} ms ({} ms); {:.0} reads ({} ms; {node_lists:.0} node lists)",
            mean_ms(total),
            phases
                .iter()
                .map(|p| mean_ms(*p))
                .collect::<Vec<_>>()
                .join(" / "),
            self.guard_reads,
            steps[..READ_STEPS.len() - 1]
                .iter()
                .map(|p| mean_ms(*p))
                .collect::<Vec<_>>()
                .join(" / "),
        )
    }

    /// The guard's p99 over the floor's.
    pub fn p99_over_floor(&self) -> f64 {
        self.guard.pct(0.99).as_secs_f64() / self.floor.pct(0.99).as_secs_f64()
    }

    /// The guard's p90 over the floor's.
    pub fn p90_over_floor(&self) -> f64 {
        self.guard.pct(0.9).as_secs_f64() / self.floor.pct(0.9).as_secs_f64()
    }
}

/// The guard's requests of each kind.
pub struct GuardRun {
    pub single: Phase,
    pub together: Phase,
    pub refusals: Phase,
    /// RSS after the single allows, and the peak after the concurrent ones (MiB).
    pub rss_after_single: f64,
    pub peak_after_together: f64,
}

/// The phases of a confirmed decision the guard times (`mosc_guard_decision_phase_duration_seconds`).
pub const DECISION_PHASES: [&str; 4] = ["cached", "wait", "read", "fresh"];

/// The steps of a confirming read the guard times
/// (`mosc_guard_confirming_read_step_duration_seconds`); node lists last.
pub const READ_STEPS: [&str; 4] = ["lists", "revision", "catch_up", "node_list"];

/// The guard's decision-time histogram's sum (seconds) and count, then each decision phase's,
/// then each read step's.
async fn decision_time(guard: &Guard) -> [(f64, f64); 9] {
    let text = guard.metrics().await.unwrap_or_default();
    // A phase's series appears with its first observation: absent counts as 0.
    let value = |series: String| testkit::probe::metric(&text, &series).unwrap_or(0.0);
    let histogram = |name: &str, labels: &str| {
        (
            value(format!("{name}_sum{labels}")),
            value(format!("{name}_count{labels}")),
        )
    };
    let phase = |p: &str| {
        histogram(
            "mosc_guard_decision_phase_duration_seconds",
            &format!("{{phase=\"{p}\"}}"),
        )
    };
    let step = |s: &str| {
        histogram(
            "mosc_guard_confirming_read_step_duration_seconds",
            &format!("{{step=\"{s}\"}}"),
        )
    };
    let mut out = [(0.0, 0.0); 9];
    out[0] = histogram("mosc_guard_admission_decision_duration_seconds", "");
    for (i, p) in DECISION_PHASES.iter().enumerate() {
        out[1 + i] = phase(p);
    }
    for (i, s) in READ_STEPS.iter().enumerate() {
        out[1 + DECISION_PHASES.len() + i] = step(s);
    }
    out
}

/// Runs `measure` as one phase: `in_guard` is what the guard's histogram gained meanwhile.
async fn phase(
    client: &kube::Client,
    guard: &Guard,
    measure: impl AsyncFnOnce(&mut Phase) -> Result<()>,
) -> Result<Phase> {
    let mut phase = Phase::default();
    let (before, lists_before) = (decision_time(guard).await, mosc_lists(client).await?);
    measure(&mut phase).await?;
    let (after, lists_after) = (decision_time(guard).await, mosc_lists(client).await?);
    phase.in_guard = std::array::from_fn(|i| (after[i].0 - before[i].0, after[i].1 - before[i].1));
    // Every confirming read lists the MachineOSConfigs once, as every floor sample does.
    phase.guard_reads = lists_after - lists_before - phase.floor.len() as f64;
    Ok(phase)
}

/// LISTs of MachineOSConfigs the API server has served (its `apiserver_request_total`).
async fn mosc_lists(client: &kube::Client) -> Result<f64> {
    let request = axum::http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"machineosconfigs\"")
                && l.contains("verb=\"LIST\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// `samples` requests one at a time, each after a floor sample.
async fn one_at_a_time(
    client: &kube::Client,
    guard: &Guard,
    fence: &NodeFence,
    samples: u64,
) -> Result<Phase> {
    phase(client, guard, async |p| {
        for _ in 0..samples {
            p.floor_sample(client, fence).await?;
            let (took, answer) = dry_run_delete(client).await?;
            p.guard.add(took, answer);
        }
        Ok(())
    })
    .await
}

/// The guard's measurements, each request or round after a floor sample.
pub async fn measure_guard(
    client: &kube::Client,
    guard: &Guard,
    fence: &NodeFence,
    s: &Settings,
) -> Result<GuardRun> {
    let single = one_at_a_time(client, guard, fence, s.samples / 2).await?;
    let rss_after_single = process::memory_mib(guard.pid()).0;
    let together = phase(client, guard, async |p| {
        for _ in 0..s.rounds {
            p.floor_sample(client, fence).await?;
            let at_once =
                futures::future::join_all((0..s.concurrent).map(|_| dry_run_delete(client))).await;
            for answer in at_once {
                let (took, answer) = answer?;
                p.guard.add(took, answer);
            }
        }
        Ok(())
    })
    .await?;
    let peak_after_together = process::memory_mib(guard.pid()).1;
    // One node mid-update to the image: the cache refuses every deletion, and the confirming
    // read confirms the refusal.
    mco::nodes(client)
        .patch(
            &realistic::node_name(0),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {CURRENT_IMAGE: &s.mid_update_image, STATE: "Working"}}}),
            ),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let refusals = one_at_a_time(client, guard, fence, s.samples).await?;
    Ok(GuardRun {
        single,
        together,
        refusals,
        rss_after_single,
        peak_after_together,
    })
}
