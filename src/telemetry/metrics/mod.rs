//! Prometheus metrics. Every label takes values from a fixed set, so series stay bounded
//! however many objects the cluster has.

use std::hash::Hash;
use std::sync::{PoisonError, RwLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::core::finalizer::{Failure, RemovalReason};
use crate::core::outcome::{Mutation, Outcome};
use crate::core::policy::Blocked;
use crate::core::registry::Status;
use crate::core::registry::needed::Need;
use crate::core::release::Rules;

mod catalogue;
mod labels;

use labels::*;
pub use labels::{DecisionPhase, ReadStep};

pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    latency: Histogram,
    phases: Family<Label, Histogram, fn() -> Histogram>,
    read_steps: Family<Label, Histogram, fn() -> Histogram>,
    unchanged: Counter,
    confirmations: Family<Label, Counter>,
    confirmation_nodes: Family<Label, Counter>,
    cache_objects: Family<Label, Gauge>,
    cache_stale: Family<Label, Gauge>,
    ready: Gauge,
    mutations: Family<Label, Counter>,
    deferred: Gauge,
    oldest_deferred: Gauge,
    removals: Family<Label, Counter>,
    deferral_seconds: Histogram,
    leader: Gauge,
    controller_errors: Family<Label, Counter>,
    certificate_expiry: Gauge,
    release_cautious: Gauge,
    release_rows: Family<ReleaseRowLabels, Gauge>,
    deletion_blocked: Family<BlockedLabels, Gauge>,
    stuck: Family<PoolLabels, Gauge>,
    needed_images: Family<NeededImageLabels, Gauge>,
    registry_requests: Counter,
    registry_checks: Family<Label, Counter>,
    deletable_builds: Family<ConfigLabels, Gauge>,
    deletable_images: Family<ConfigLabels, Gauge>,
    deletable_images_unknown: Family<ConfigLabels, Gauge>,
    registry_tags: Counter,
    /// Held to write while a gauge family is replaced whole, and to read while the text is
    /// encoded: a scrape sees the old series or the new ones, never a family just cleared
    /// (the audit replaces its gauges on a task of its own, while scrapes run).
    replacing: RwLock<()>,
}

impl Metrics {
    /// Held while a gauge family is replaced whole ([`replace`]); see the field.
    fn replacing(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.replacing
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn decision(&self, resource: &'static str, result: Outcome, seconds: f64) {
        let result = result.label();
        self.decisions
            .get_or_create(&DecisionLabels { resource, result })
            .inc();
        self.latency.observe(seconds);
    }

    /// Time spent in one phase of a confirmed decision (see [`DecisionPhase`]).
    pub fn decision_phase(&self, phase: DecisionPhase, took: std::time::Duration) {
        self.phases
            .get_or_create(&[("phase", phase.label())])
            .observe(took.as_secs_f64());
    }

    /// A confirming read showed exactly what the cached verdict was decided on.
    pub fn confirmation_unchanged(&self) {
        self.unchanged.inc();
    }

    /// One step of a confirming read (see [`ReadStep`]), once per read.
    pub fn read_step(&self, step: ReadStep, took: std::time::Duration) {
        self.read_steps
            .get_or_create(&[("step", step.label())])
            .observe(took.as_secs_f64());
    }

    /// `result` is one of "confirmed", "overturned" (a would-be allow), "refusal-confirmed",
    /// "refusal-overturned" (a would-be refusal), "failed".
    pub fn confirmation(&self, result: &'static str) {
        self.confirmations
            .get_or_create(&[("result", result)])
            .inc();
    }

    /// `source` is "cache" or "list" (see [`crate::access::view::Fresh::source`]).
    pub fn confirmation_nodes(&self, source: &'static str) {
        self.confirmation_nodes
            .get_or_create(&[("source", source)])
            .inc();
    }

    pub fn mutation(&self, result: Mutation) {
        self.mutations
            .get_or_create(&[("result", result.label())])
            .inc();
    }

    /// A deferred deletion's finalizer removed `seconds` after its deletionTimestamp.
    pub fn finalizer_removed(&self, reason: RemovalReason, seconds: f64) {
        self.removals
            .get_or_create(&[("reason", reason.label())])
            .inc();
        self.deferral_seconds.observe(seconds);
    }

    /// The finalizer controller's patch failed with `error`.
    pub fn controller_error(&self, error: Failure) {
        self.controller_errors
            .get_or_create(&[("error", error.label())])
            .inc();
    }

    /// `n` deferred deletions, the oldest marked for deletion at `oldest` (seconds since the
    /// Unix epoch; `None` when there is none, exported as 0).
    pub fn set_deferred(&self, n: usize, oldest: Option<i64>) {
        self.deferred.set(count(n));
        self.oldest_deferred.set(oldest.unwrap_or(0));
    }

    /// The registry audit's counts per (pool, need, status), replaced whole.
    pub fn needed_images(
        &self,
        counts: &std::collections::BTreeMap<(String, Need, Status), usize>,
    ) {
        let series = counts.iter().map(|((pool, need, status), n)| {
            let labels = NeededImageLabels {
                pool: pool.clone(),
                need: need.label(),
                status: status.label(),
            };
            (labels, count(*n))
        });
        self.replace_whole(&self.needed_images, series);
    }

    /// One image the audit asked about, and the requests it took so far (a running total).
    pub fn registry_check(&self, status: Status) {
        self.registry_checks
            .get_or_create(&[("result", status.label())])
            .inc();
    }

    /// Adds the audit's requests since it last reported.
    pub fn registry_requests(&self, n: u64) {
        self.registry_requests.inc_by(n);
    }

    /// Whether this replica holds the Lease (the one that writes the audit's Events).
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The serving certificate's notAfter, seconds since the Unix epoch (set by `server::tls`).
    pub fn set_certificate_expiry(&self, not_after: i64) {
        self.certificate_expiry.set(not_after);
    }

    /// The deletion-blocked gauge, one series per MachineOSConfig: the previous set is
    /// replaced whole, so a config that went or changed reason leaves no stale series.
    pub fn deletion_blocked(&self, configs: impl IntoIterator<Item = (String, Blocked)>) {
        let series = configs.into_iter().map(|(machineosconfig, why)| {
            let labels = BlockedLabels {
                machineosconfig,
                reason: why.label(),
            };
            (labels, i64::from(why != Blocked::No))
        });
        self.replace_whole(&self.deletion_blocked, series);
    }

    /// Nodes stuck on a lost image per pool (`core::recovery::stuck::stuck_per_pool`); the
    /// series set is replaced whole, so a deleted pool leaves no stale series.
    pub fn nodes_stuck(&self, pools: impl IntoIterator<Item = (String, usize)>) {
        let series = pools
            .into_iter()
            .map(|(pool, n)| (PoolLabels { pool }, count(n)));
        self.replace_whole(&self.stuck, series);
    }

    /// MachineOSBuilds `prune` would delete, per MachineOSConfig (`core::prune`, its defaults);
    /// the series set is replaced whole, so a deleted config leaves no stale series.
    pub fn deletable_builds(&self, configs: impl IntoIterator<Item = (String, usize)>) {
        let series = configs
            .into_iter()
            .map(|(machineosconfig, n)| (ConfigLabels { machineosconfig }, count(n)));
        self.replace_whole(&self.deletable_builds, series);
    }

    /// Images `prune --apply --images` would delete, per MachineOSConfig (`None`: a repository
    /// of it could not be listed: no count, and the unknown gauge at 1); both series sets are
    /// replaced whole, so a deleted config leaves no stale series.
    pub fn deletable_images(&self, configs: impl IntoIterator<Item = (String, Option<usize>)>) {
        let configs: Vec<_> = configs
            .into_iter()
            .map(|(machineosconfig, n)| (ConfigLabels { machineosconfig }, n))
            .collect();
        let unknown = configs
            .iter()
            .map(|(l, n)| (l.clone(), i64::from(n.is_none())));
        let counts = configs
            .iter()
            .filter_map(|(l, n)| Some((l.clone(), count((*n)?))));
        let _replacing = self.replacing();
        replace(&self.deletable_images_unknown, unknown);
        replace(&self.deletable_images, counts);
    }

    /// Adds the tags the audit resolved to count deletable images.
    pub fn registry_tags_resolved(&self, n: u64) {
        self.registry_tags.inc_by(n);
    }

    /// The release rules decisions use now: which rows, and whether one is the cautious one.
    /// The row set is replaced whole, so a finished upgrade leaves no stale series.
    pub fn release_rules(&self, rules: &Rules) {
        let rows: Vec<_> = rules
            .row_names()
            .into_iter()
            .map(|release| (ReleaseRowLabels { release }, 1))
            .collect();
        let _replacing = self.replacing();
        self.release_cautious.set(i64::from(rules.cautious()));
        replace(&self.release_rows, rows);
    }

    /// [`replace`] under the `replacing` lock, the series built before it is taken.
    fn replace_whole<L: Clone + Hash + Eq>(
        &self,
        family: &Family<L, Gauge>,
        series: impl IntoIterator<Item = (L, i64)>,
    ) {
        let series: Vec<_> = series.into_iter().collect();
        let _replacing = self.replacing();
        replace(family, series);
    }

    /// Renders the text exposition after refreshing the cache gauges.
    pub fn render(
        &self,
        sizes: &[(&'static str, usize)],
        stale: &[(&'static str, bool)],
        ready: bool,
    ) -> String {
        for (cache, n) in sizes {
            self.cache_objects
                .get_or_create(&[("cache", cache)])
                .set(count(*n));
        }
        for (cache, stale) in stale {
            self.cache_stale
                .get_or_create(&[("cache", cache)])
                .set(i64::from(*stale));
        }
        self.ready.set(i64::from(ready));
        let mut out = String::new();
        let _replaced = self
            .replacing
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics");
        }
        out
    }
}

/// Replaces a gauge family's series whole (the caller holds [`Metrics`]' `replacing` lock), so
/// a pool, config or release row that went leaves no stale series.
fn replace<L: Clone + Hash + Eq>(
    family: &Family<L, Gauge>,
    series: impl IntoIterator<Item = (L, i64)>,
) {
    family.clear();
    for (labels, value) in series {
        family.get_or_create(&labels).set(value);
    }
}

/// A count as a gauge's value.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
