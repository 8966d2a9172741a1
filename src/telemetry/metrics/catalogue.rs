//! Every metric mosc-guard exports, registered once: its name, help text, type and buckets.
//! The help texts are what `/metrics` and docs/metrics.md show.

use std::sync::RwLock;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use super::Metrics;

/// 100 µs .. ~5.9 s: cache decisions are sub-millisecond, confirmations a list call bounded by
/// --confirm-timeout (5 s by default).
pub(super) fn decision_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 3.0, 11))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut c = Catalogue(Registry::with_prefix("mosc_guard"));
        Self {
            decisions: c.add("admission_decisions", "Admission decisions by resource and result"),
            latency: c.with(
                "admission_decision_duration_seconds",
                "Time to decide one admission request, including any confirming read",
                decision_buckets(),
            ),
            phases: c.with(
                "decision_phase_duration_seconds",
                "Where a confirmed decision's time goes: the verdict from the caches (cached), waiting for the confirming read to start (wait: the batch window, a turn), the read (read: the API server, the node fence), the verdict on the read (fresh)",
                Family::new_with_constructor(decision_buckets),
            ),
            read_steps: c.with(
                "confirming_read_step_duration_seconds",
                "The steps of each confirming read, from its start: the consistent lists of the objects (lists), the node collection's revision (revision), from there the node cache reaching it (catch_up), a list of every node when the cache was late (node_list)",
                Family::new_with_constructor(decision_buckets),
            ),
            unchanged: c.add(
                "confirmations_unchanged",
                "Confirming reads that showed exactly what the verdict from the caches was decided on (the objects' versions, the node cache's generation): that verdict stood without a second evaluation",
            ),
            confirmations: c.add(
                "confirmations",
                "Fresh reads that decided a deletion the cache would allow (confirmed, overturned) or refuse (refusal-confirmed, refusal-overturned), or failed",
            ),
            confirmation_nodes: c.add(
                "confirmation_nodes",
                "Confirmations by where their nodes came from: the node cache once it passed the \
                 fence (cache), or a list of every node (list)",
            ),
            cache_objects: c.add("cache_objects", "Objects held by each cache"),
            cache_stale: c.add(
                "cache_stale",
                "1 while the cache's watch has been failing for longer than --stale-after",
            ),
            ready: c.add(
                "ready",
                "1 while /readyz answers 200: every cache synced, none stale, not shutting down",
            ),
            mutations: c.add("mutations", "Mutating-webhook requests by result (defer mode)"),
            deferred: c.add(
                "deferred_deletions",
                "MachineOSConfigs being deleted whose finalizer mosc-guard still holds (leader only)",
            ),
            // A timestamp, not an age: it survives restarts and leader changes unchanged, so an
            // alert on `time() - this` sees one long deferral, never a churn of short ones.
            oldest_deferred: c.add(
                "oldest_deferred_deletion_timestamp_seconds",
                "deletionTimestamp of the oldest MachineOSConfig whose finalizer mosc-guard still holds (seconds since the Unix epoch; 0 when none; leader only)",
            ),
            // The metric's name keeps the word it was published with.
            removals: c.add(
                "finalizer_releases",
                "Deferred deletions completed (the finalizer removed), by reason",
            ),
            // 5 s .. ~2.8 h: a rollout takes minutes per node.
            deferral_seconds: c.with(
                "deferred_deletion_duration_seconds",
                "Time from a MachineOSConfig's deletionTimestamp to the removal of its finalizer",
                Histogram::new(exponential_buckets(5.0, 2.0, 12)),
            ),
            leader: c.add(
                "leader",
                "1 while this replica holds the lease and runs the finalizer controller",
            ),
            controller_errors: c.add(
                "controller_errors",
                "Failed finalizer patches of the finalizer controller, by kind (conflict is retried at once, the rest with backoff)",
            ),
            certificate_expiry: c.add(
                "serving_certificate_expiry_timestamp_seconds",
                "When the serving certificate in service expires (notAfter, seconds since the Unix epoch; 0 if unreadable)",
            ),
            release_cautious: c.add(
                "release_rules_cautious",
                "1 while decisions use the most cautious rules because the OpenShift release is unknown \
                 or newer than the releases mosc-guard knows (see mosc_guard_release_rules)",
            ),
            release_rows: c.add(
                "release_rules",
                "1 for each release whose rules decisions use now: the cluster's, and while an upgrade \
                 is in flight also each release whose machine-config-operator may still run (the \
                 most cautious of their rules applies); `unknown` for the cautious rules",
            ),
            deletion_blocked: c.add(
                "deletion_blocked",
                "Per MachineOSConfig, 1 while deleting it now would be refused (decided from the \
                 caches, as a denial is), with the first reason: node, pool or machine; 0 with \
                 reason none otherwise",
            ),
            stuck: c.add(
                "nodes_stuck_on_lost_image",
                "Per pool, nodes Degraded on a desiredImage that differs from their currentImage and \
                 that no MachineOSBuild carries (from the caches): the lost-image bug already hit \
                 them, MCO never recovers them, and `mosc-guard recover` does",
            ),
            needed_images: c.add(
                "needed_images",
                "Distinct images nodes of the pool need that their registry does not serve \
                 (status missing: the registry says it is gone; unknown: it could not tell), asked \
                 as a node pulls; need pending: a node is about to pull it, running: nodes run it",
            ),
            registry_requests: c.add(
                "registry_requests",
                "HTTP requests the registry audit made (pings, manifests, tokens)",
            ),
            registry_checks: c.add(
                "registry_checks",
                "Images the registry audit asked about, by answer (available, missing, unknown)",
            ),
            deletable_builds: c.add(
                "deletable_builds",
                "Per MachineOSConfig, MachineOSBuilds `mosc-guard prune` would delete now with its \
                 defaults (--keep 3, --keep-younger-than 60m): no node needs their image, MCO would \
                 not reuse them, the guard would allow their deletion (from the caches)",
            ),
            deletable_images: c.add(
                "deletable_images",
                "Per MachineOSConfig, images (digests) in its repositories that `mosc-guard prune \
                 --apply --images` would delete: tags no MachineOSBuild names and no node, build or \
                 config needs, as prune plans them, listed by the registry audit every interval \
                 with the nodes' pull secret; no series while a repository of the config could not \
                 be listed (mosc_guard_deletable_images_unknown)",
            ),
            deletable_images_unknown: c.add(
                "deletable_images_unknown",
                "Per MachineOSConfig, 1 while a repository of it could not be listed with the \
                 nodes' pull secret (mosc_guard_deletable_images has no series for it then), 0 \
                 when every one was",
            ),
            registry_tags: c.add(
                "registry_tags_resolved",
                "Tags the registry audit resolved to count deletable images (one manifest GET \
                 each, every interval): grows with the tags in the MachineOSConfigs' repositories, \
                 not with nodes",
            ),
            registry: c.0,
            replacing: RwLock::new(()),
        }
    }
}

/// The registry being filled: each metric is registered as it is created, in the order
/// `/metrics` shows them.
struct Catalogue(Registry);

impl Catalogue {
    fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.with(name, help, M::default())
    }

    fn with<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0.register(name, help, metric.clone());
        metric
    }
}
