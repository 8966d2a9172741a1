//! Prometheus metrics. Every label takes values from a fixed set, so series stay bounded
//! however many objects the cluster has.

use std::hash::Hash;
use std::sync::{PoisonError, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
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

/// Every label value below is a `label()` of a domain enum or a fixed string.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    resource: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerErrorLabels {
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BlockedLabels {
    machineosconfig: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReleaseRowLabels {
    /// A row of `core::release` (`4.19` ... or `unknown`): a fixed set.
    release: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    /// A MachineConfigPool's name: as many as the cluster has pools.
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NeededImageLabels {
    /// A MachineConfigPool's name.
    pool: String,
    /// `pending` (a node is about to pull it) or `running`.
    need: &'static str,
    /// `missing` or `unknown`.
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfigLabels {
    /// A MachineOSConfig's name (empty for builds that name none): bounded by the pools.
    machineosconfig: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    cache: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

/// The phases of a decision the engine confirms, in order.
#[derive(Clone, Copy, Debug)]
pub enum DecisionPhase {
    /// The verdict from the caches (or waiting for a concurrent request's).
    Cached,
    /// From there until the confirming read the request uses started: the batch window, a
    /// turn (the cap on reads at once); zero when that read had started already.
    Wait,
    /// From then to the confirming read's result: the API server, the node fence.
    Read,
    /// The verdict on the read (or waiting for a concurrent request's on the same read).
    Fresh,
}

impl DecisionPhase {
    fn label(self) -> &'static str {
        match self {
            Self::Cached => "cached",
            Self::Wait => "wait",
            Self::Read => "read",
            Self::Fresh => "fresh",
        }
    }
}

/// The steps of a confirming read, each timed from the read's start but `CatchUp`.
#[derive(Clone, Copy, Debug)]
pub enum ReadStep {
    /// The consistent lists of MachineOSConfigs, MachineOSBuilds, pools, Machines and the
    /// ClusterVersion.
    Lists,
    /// The node collection's revision (the fence).
    Revision,
    /// From the revision's arrival to the node cache applying it.
    CatchUp,
    /// A list of every node, when the cache was late.
    NodeList,
}

impl ReadStep {
    fn label(self) -> &'static str {
        match self {
            Self::Lists => "lists",
            Self::Revision => "revision",
            Self::CatchUp => "catch_up",
            Self::NodeList => "node_list",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

/// 100 µs .. ~5.9 s: cache decisions are sub-millisecond, confirmations a list call bounded by
/// --confirm-timeout (5 s by default).
fn decision_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 3.0, 11,
    ))
}

pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    latency: Histogram,
    phases: Family<PhaseLabels, Histogram, fn() -> Histogram>,
    read_steps: Family<StepLabels, Histogram, fn() -> Histogram>,
    unchanged: Counter,
    confirmations: Family<ResultLabels, Counter>,
    confirmation_nodes: Family<SourceLabels, Counter>,
    cache_objects: Family<CacheLabels, Gauge>,
    cache_stale: Family<CacheLabels, Gauge>,
    ready: Gauge,
    mutations: Family<ResultLabels, Counter>,
    deferred: Gauge,
    oldest_deferred: Gauge,
    removals: Family<ReasonLabels, Counter>,
    deferral_seconds: Histogram,
    leader: Gauge,
    controller_errors: Family<ControllerErrorLabels, Counter>,
    certificate_expiry: Gauge,
    release_cautious: Gauge,
    release_rows: Family<ReleaseRowLabels, Gauge>,
    deletion_blocked: Family<BlockedLabels, Gauge>,
    stuck: Family<PoolLabels, Gauge>,
    needed_images: Family<NeededImageLabels, Gauge>,
    registry_requests: Counter,
    registry_checks: Family<ResultLabels, Counter>,
    deletable_builds: Family<ConfigLabels, Gauge>,
    deletable_images: Family<ConfigLabels, Gauge>,
    deletable_images_unknown: Family<ConfigLabels, Gauge>,
    registry_tags: Counter,
    /// Held to write while a gauge family is replaced whole, and to read while the text is
    /// encoded: a scrape sees the old series or the new ones, never a family just cleared
    /// (the audit replaces its gauges on a task of its own, while scrapes run).
    replacing: RwLock<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mosc_guard");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "admission_decisions",
            "Admission decisions by resource and result",
            decisions.clone(),
        );
        let latency = decision_buckets();
        registry.register(
            "admission_decision_duration_seconds",
            "Time to decide one admission request, including any confirming read",
            latency.clone(),
        );
        let phases: Family<PhaseLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(decision_buckets);
        registry.register(
            "decision_phase_duration_seconds",
            "Where a confirmed decision's time goes: the verdict from the caches (cached), waiting for the confirming read to start (wait: the batch window, a turn), the read (read: the API server, the node fence), the verdict on the read (fresh)",
            phases.clone(),
        );
        let read_steps: Family<StepLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(decision_buckets);
        registry.register(
            "confirming_read_step_duration_seconds",
            "The steps of each confirming read, from its start: the consistent lists of the objects (lists), the node collection's revision (revision), from there the node cache reaching it (catch_up), a list of every node when the cache was late (node_list)",
            read_steps.clone(),
        );
        let unchanged = Counter::default();
        registry.register(
            "confirmations_unchanged",
            "Confirming reads that showed exactly what the verdict from the caches was decided on (the objects' versions, the node cache's generation): that verdict stood without a second evaluation",
            unchanged.clone(),
        );
        let confirmations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "confirmations",
            "Fresh reads that decided a deletion the cache would allow (confirmed, overturned) or refuse (refusal-confirmed, refusal-overturned), or failed",
            confirmations.clone(),
        );
        let confirmation_nodes = Family::<SourceLabels, Counter>::default();
        registry.register(
            "confirmation_nodes",
            "Confirmations by where their nodes came from: the node cache once it passed the \
             fence (cache), or a list of every node (list)",
            confirmation_nodes.clone(),
        );
        let cache_objects = Family::<CacheLabels, Gauge>::default();
        registry.register(
            "cache_objects",
            "Objects held by each cache",
            cache_objects.clone(),
        );
        let cache_stale = Family::<CacheLabels, Gauge>::default();
        registry.register(
            "cache_stale",
            "1 while the cache's watch has been failing for longer than --stale-after",
            cache_stale.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 while /readyz answers 200: every cache synced, none stale, not shutting down",
            ready.clone(),
        );
        let mutations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "mutations",
            "Mutating-webhook requests by result (defer mode)",
            mutations.clone(),
        );
        let deferred = Gauge::default();
        registry.register(
            "deferred_deletions",
            "MachineOSConfigs being deleted whose finalizer mosc-guard still holds (leader only)",
            deferred.clone(),
        );
        // A timestamp, not an age: it survives restarts and leader changes unchanged, so an
        // alert on `time() - this` sees one long deferral, never a churn of short ones.
        let oldest_deferred = Gauge::default();
        registry.register(
            "oldest_deferred_deletion_timestamp_seconds",
            "deletionTimestamp of the oldest MachineOSConfig whose finalizer mosc-guard still holds (seconds since the Unix epoch; 0 when none; leader only)",
            oldest_deferred.clone(),
        );
        // The metric's name keeps the word it was published with.
        let removals = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "finalizer_releases",
            "Deferred deletions completed (the finalizer removed), by reason",
            removals.clone(),
        );
        // 5 s .. ~2.8 h: a rollout takes minutes per node.
        let deferral_seconds = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(5.0, 2.0, 12),
        );
        registry.register(
            "deferred_deletion_duration_seconds",
            "Time from a MachineOSConfig's deletionTimestamp to the removal of its finalizer",
            deferral_seconds.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the lease and runs the finalizer controller",
            leader.clone(),
        );
        let controller_errors = Family::<ControllerErrorLabels, Counter>::default();
        registry.register(
            "controller_errors",
            "Failed finalizer patches of the finalizer controller, by kind (conflict is retried at once, the rest with backoff)",
            controller_errors.clone(),
        );
        let certificate_expiry = Gauge::default();
        registry.register(
            "serving_certificate_expiry_timestamp_seconds",
            "When the serving certificate in service expires (notAfter, seconds since the Unix epoch; 0 if unreadable)",
            certificate_expiry.clone(),
        );
        let release_cautious = Gauge::default();
        registry.register(
            "release_rules_cautious",
            "1 while decisions use the most cautious rules because the OpenShift release is unknown \
             or newer than the releases mosc-guard knows (see mosc_guard_release_rules)",
            release_cautious.clone(),
        );
        let release_rows = Family::<ReleaseRowLabels, Gauge>::default();
        registry.register(
            "release_rules",
            "1 for each release whose rules decisions use now: the cluster's, and while an upgrade \
             is in flight also each release whose machine-config-operator may still run (the \
             most cautious of their rules applies); `unknown` for the cautious rules",
            release_rows.clone(),
        );
        let deletion_blocked = Family::<BlockedLabels, Gauge>::default();
        registry.register(
            "deletion_blocked",
            "Per MachineOSConfig, 1 while deleting it now would be refused (decided from the \
             caches, as a denial is), with the first reason: node, pool or machine; 0 with \
             reason none otherwise",
            deletion_blocked.clone(),
        );
        let stuck = Family::<PoolLabels, Gauge>::default();
        registry.register(
            "nodes_stuck_on_lost_image",
            "Per pool, nodes Degraded on a desiredImage that differs from their currentImage and \
             that no MachineOSBuild carries (from the caches): the lost-image bug already hit \
             them, MCO never recovers them, and `mosc-guard recover` does",
            stuck.clone(),
        );
        let needed_images = Family::<NeededImageLabels, Gauge>::default();
        registry.register(
            "needed_images",
            "Distinct images nodes of the pool need that their registry does not serve \
             (status missing: the registry says it is gone; unknown: it could not tell), asked \
             as a node pulls; need pending: a node is about to pull it, running: nodes run it",
            needed_images.clone(),
        );
        let registry_requests = Counter::default();
        registry.register(
            "registry_requests",
            "HTTP requests the registry audit made (pings, manifests, tokens)",
            registry_requests.clone(),
        );
        let registry_checks = Family::<ResultLabels, Counter>::default();
        registry.register(
            "registry_checks",
            "Images the registry audit asked about, by answer (available, missing, unknown)",
            registry_checks.clone(),
        );
        let deletable_builds = Family::<ConfigLabels, Gauge>::default();
        registry.register(
            "deletable_builds",
            "Per MachineOSConfig, MachineOSBuilds `mosc-guard prune` would delete now with its \
             defaults (--keep 3, --keep-younger-than 60m): no node needs their image, MCO would \
             not reuse them, the guard would allow their deletion (from the caches)",
            deletable_builds.clone(),
        );
        let deletable_images = Family::<ConfigLabels, Gauge>::default();
        registry.register(
            "deletable_images",
            "Per MachineOSConfig, images (digests) in its repositories that `mosc-guard prune \
             --apply --images` would delete: tags no MachineOSBuild names and no node, build or \
             config needs, as prune plans them, listed by the registry audit every interval \
             with the nodes' pull secret; no series while a repository of the config could not \
             be listed (mosc_guard_deletable_images_unknown)",
            deletable_images.clone(),
        );
        let deletable_images_unknown = Family::<ConfigLabels, Gauge>::default();
        registry.register(
            "deletable_images_unknown",
            "Per MachineOSConfig, 1 while a repository of it could not be listed with the \
             nodes' pull secret (mosc_guard_deletable_images has no series for it then), 0 \
             when every one was",
            deletable_images_unknown.clone(),
        );
        let registry_tags = Counter::default();
        registry.register(
            "registry_tags_resolved",
            "Tags the registry audit resolved to count deletable images (one manifest GET \
             each, every interval): grows with the tags in the MachineOSConfigs' repositories, \
             not with nodes",
            registry_tags.clone(),
        );
        Self {
            registry,
            decisions,
            latency,
            phases,
            read_steps,
            unchanged,
            confirmations,
            confirmation_nodes,
            cache_objects,
            cache_stale,
            ready,
            mutations,
            deferred,
            oldest_deferred,
            removals,
            deferral_seconds,
            leader,
            controller_errors,
            certificate_expiry,
            release_cautious,
            release_rows,
            deletion_blocked,
            stuck,
            needed_images,
            registry_requests,
            registry_checks,
            deletable_builds,
            deletable_images,
            deletable_images_unknown,
            registry_tags,
            replacing: RwLock::new(()),
        }
    }
}

impl Metrics {
    /// Held while a gauge family is replaced whole ([`replace`]); see the field.
    fn replacing(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.replacing
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn decision(&self, resource: &'static str, result: Outcome, seconds: f64) {
        self.decisions
            .get_or_create(&DecisionLabels {
                resource,
                result: result.label(),
            })
            .inc();
        self.latency.observe(seconds);
    }

    /// Time spent in one phase of a confirmed decision (see [`DecisionPhase`]).
    pub fn decision_phase(&self, phase: DecisionPhase, took: std::time::Duration) {
        self.phases
            .get_or_create(&PhaseLabels {
                phase: phase.label(),
            })
            .observe(took.as_secs_f64());
    }

    /// A confirming read showed exactly what the cached verdict was decided on.
    pub fn confirmation_unchanged(&self) {
        self.unchanged.inc();
    }

    /// One step of a confirming read (see [`ReadStep`]), once per read.
    pub fn read_step(&self, step: ReadStep, took: std::time::Duration) {
        self.read_steps
            .get_or_create(&StepLabels { step: step.label() })
            .observe(took.as_secs_f64());
    }

    /// `result` is one of "confirmed", "overturned" (a would-be allow), "refusal-confirmed",
    /// "refusal-overturned" (a would-be refusal), "failed".
    pub fn confirmation(&self, result: &'static str) {
        self.confirmations
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// `source` is "cache" or "list" (see [`crate::access::view::Fresh::source`]).
    pub fn confirmation_nodes(&self, source: &'static str) {
        self.confirmation_nodes
            .get_or_create(&SourceLabels { source })
            .inc();
    }

    pub fn mutation(&self, result: Mutation) {
        self.mutations
            .get_or_create(&ResultLabels {
                result: result.label(),
            })
            .inc();
    }

    /// A deferred deletion's finalizer removed `seconds` after its deletionTimestamp.
    pub fn finalizer_removed(&self, reason: RemovalReason, seconds: f64) {
        self.removals
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
        self.deferral_seconds.observe(seconds);
    }

    /// The finalizer controller's patch failed with `error`.
    pub fn controller_error(&self, error: Failure) {
        self.controller_errors
            .get_or_create(&ControllerErrorLabels {
                error: error.label(),
            })
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
        let series: Vec<_> = series.collect();
        let _replacing = self.replacing();
        replace(&self.needed_images, series);
    }

    /// One image the audit asked about, and the requests it took so far (a running total).
    pub fn registry_check(&self, status: Status) {
        self.registry_checks
            .get_or_create(&ResultLabels {
                result: status.label(),
            })
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
        let series: Vec<_> = configs
            .into_iter()
            .map(|(machineosconfig, why)| {
                let labels = BlockedLabels {
                    machineosconfig,
                    reason: why.label(),
                };
                (labels, i64::from(why != Blocked::No))
            })
            .collect();
        let _replacing = self.replacing();
        replace(&self.deletion_blocked, series);
    }

    /// Nodes stuck on a lost image per pool (`core::recovery::stuck::stuck_per_pool`); the
    /// series set is replaced whole, so a deleted pool leaves no stale series.
    pub fn nodes_stuck(&self, pools: impl IntoIterator<Item = (String, usize)>) {
        let series: Vec<_> = pools
            .into_iter()
            .map(|(pool, n)| (PoolLabels { pool }, count(n)))
            .collect();
        let _replacing = self.replacing();
        replace(&self.stuck, series);
    }

    /// MachineOSBuilds `prune` would delete, per MachineOSConfig (`core::prune`, its defaults);
    /// the series set is replaced whole, so a deleted config leaves no stale series.
    pub fn deletable_builds(&self, configs: impl IntoIterator<Item = (String, usize)>) {
        let series: Vec<_> = configs
            .into_iter()
            .map(|(machineosconfig, n)| (ConfigLabels { machineosconfig }, count(n)))
            .collect();
        let _replacing = self.replacing();
        replace(&self.deletable_builds, series);
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

    /// Renders the text exposition after refreshing the cache gauges.
    pub fn render(
        &self,
        sizes: &[(&'static str, usize)],
        stale: &[(&'static str, bool)],
        ready: bool,
    ) -> String {
        for (cache, n) in sizes {
            self.cache_objects
                .get_or_create(&CacheLabels { cache })
                .set(count(*n));
        }
        for (cache, stale) in stale {
            self.cache_stale
                .get_or_create(&CacheLabels { cache })
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
