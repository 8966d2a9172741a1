//! Every metric mosc-guard exports, registered once: its name, help text, type and buckets.
//! The help texts are what `/metrics` and docs/metrics.md show.

use std::sync::RwLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::Metrics;
use super::labels::*;

/// 100 µs .. ~5.9 s: cache decisions are sub-millisecond, confirmations a list call bounded by
/// --confirm-timeout (5 s by default).
pub(super) fn decision_buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 3.0, 11,
    ))
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
