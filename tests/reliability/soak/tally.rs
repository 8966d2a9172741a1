//! The tally of all trials and the summary printed at the end.

use super::*;

/// What the soak counts (one per test function).
#[derive(Default, Debug)]
pub(super) struct Stats {
    pub(super) trials: u64,
    pub(super) deletions: u64,
    pub(super) dry_runs: u64,
    pub(super) real: u64,
    pub(super) allowed: u64,
    pub(super) deferred: u64,
    pub(super) denied: u64,
    pub(super) denied_needed: u64,
    pub(super) failed_requests: u64,
    pub(super) not_found: u64,
    pub(super) safe_attempts: u64,
    pub(super) false_allows: u64,
    /// The trials (by pool) with a false allow: the guard's log lines naming them are printed.
    pub(super) false_allow_pools: BTreeSet<String>,
    pub(super) raced_allows: u64,
    pub(super) removals_checked: u64,
    pub(super) false_denials: u64,
    pub(super) raced_denials: u64,
    pub(super) degraded: u64,
    pub(super) stranded: u64,
    pub(super) unsettled: u64,
    pub(super) trial_errors: u64,
    /// Per settled trial: from the oracle first seeing its deletion safe to it being allowed
    /// (deny) or the object gone (defer).
    pub(super) liveness: Vec<Duration>,
    pub(super) liveness_violations: u64,
    pub(super) across_guard_restart: u64,
    pub(super) across_apiserver_restart: u64,
    pub(super) guard_restarts: u64,
    pub(super) apiserver_restarts: u64,
    pub(super) denial_reasons: BTreeMap<String, u64>,
    pub(super) false_denial_reasons: BTreeMap<String, u64>,
    pub(super) failures: BTreeMap<String, u64>,
    pub(super) details: Vec<String>,
}

/// A denial message reduced to its kind (names, digests and numbers dropped).
pub(super) fn bucket(message: &str) -> String {
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
pub(super) fn short(image: Option<&str>) -> String {
    image.map_or_else(
        || "none".to_owned(),
        |i| i[i.len().saturating_sub(8)..].to_owned(),
    )
}

pub(super) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// "p50 0.41s p99 2.10s max 3.80s (n 500)" of `samples`, or "none".
pub(super) fn spread(samples: &[Duration]) -> String {
    if samples.is_empty() {
        return "none".to_owned();
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize].as_secs_f64();
    format!(
        "p50 {:.2}s p99 {:.2}s max {:.2}s (n {})",
        at(0.5),
        at(0.99),
        at(1.0),
        sorted.len()
    )
}

pub(super) fn summary(mode: Mode, seed: u64, s: &Stats, planned: usize, took: Duration) -> String {
    let mut out = format!(
        "soak {}: trials={} false_allows={} degraded={} false_denials={} ({:.2}% of {} safe attempts) \
         stranded={} | seed={seed:#x} deletions={} (dry-run {}, real {}) allowed={} deferred={} \
         denied={} (needed {}, false {}, raced {}) raced_allows={} removals_checked={} \
         failed_requests={} not_found={} unsettled={} trial_errors={} liveness={} \
         (bound {}s, over it {}) guard_restarts={} (trials across {}) apiserver_restarts={} \
         (trials across {}) planned={planned} wall={:.0}s",
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
        spread(&s.liveness),
        LIVENESS_BOUND.as_secs(),
        s.liveness_violations,
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
