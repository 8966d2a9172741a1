//! `serve`'s registry audit: is every image a node needs still served, asked as the node pulls
//! it, before the node tries (docs/design.md, "Registry truth"). One task per replica, never on
//! admission's path: every tick (5 s) it takes the needed images from the caches, asks a new one
//! at once, an available one every interval, a missing or unknown one after a backoff (30 s
//! doubling, at most the interval), and publishes the gauge
//! `mosc_guard_needed_images{pool,need,status}`. The pull configuration is read again every
//! interval; while it cannot be, every image is unknown. An image turning missing writes a
//! `NeededImageMissing` Event (the Lease holder only); the guard changes nothing. Once per
//! interval it also counts what `prune --images` would delete (`images`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::access::registry::{self, Checker, Limits};
use crate::access::view::ClusterView;
use crate::core::policy::{PolicyMode, TargetKind};
use crate::core::registry::answer::{Answer, Status};
use crate::core::registry::needed::{Need, NeededImage};
use crate::core::registry::needed_images;
use crate::core::registry::report::{one_line, pool_counts, who};
use crate::core::snapshot::Snapshot;
use crate::telemetry::events::{Events, reference};
use crate::telemetry::metrics::Metrics;

mod images;

/// How often the audit looks at the caches.
const TICK: Duration = Duration::from_secs(5);
/// The first retry of an image that is not available.
const RETRY: Duration = Duration::from_secs(30);

/// What the audit knows of one image.
struct Known {
    verdict: Answer,
    at: Instant,
    /// Answers in a row that were not available.
    failures: u32,
}

impl Known {
    fn due(&self, now: Instant, interval: Duration) -> bool {
        let wait = if self.verdict.status == Status::Available {
            interval
        } else {
            let backoff =
                RETRY.saturating_mul(2u32.saturating_pow(self.failures.saturating_sub(1)));
            backoff.min(interval)
        };
        now.duration_since(self.at) >= wait
    }
}

/// Runs until `stop`: reads the cached nodes and objects from `view` and the pull configuration
/// with `client`, sets its gauges in `metrics`, writes Events with `events`. Every `interval` an
/// available image is asked again, and the pull configuration read again.
pub async fn run<V: ClusterView>(
    view: Arc<V>,
    metrics: Arc<Metrics>,
    client: kube::Client,
    events: Events,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut known: HashMap<String, Known> = HashMap::new();
    let mut checker: Option<Arc<Checker>> = None;
    // While the pull configuration cannot be read: the answer every image gets.
    let mut unreadable: Option<Answer> = None;
    // When the pull configuration is read next: every interval, or after `retry` while it fails.
    let mut next_read = Instant::now();
    let mut reported_requests = 0u64;
    let mut deletable = images::Counter::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        if !view.synced() {
            continue;
        }
        // The node's pull configuration, read again every interval (answers already known are
        // kept: each is asked again when due, with the new configuration).
        if Instant::now() >= next_read {
            match registry::pull_config(&client).await {
                Ok(config) => {
                    // A new checker only for a new configuration: the old one's tokens and
                    // pings stay valid otherwise (a token saves two requests per image).
                    let same = checker.as_ref().is_some_and(|c| *c.config() == config);
                    if !same {
                        if let Some(old) = &checker {
                            metrics.registry_requests(old.requests() - reported_requests);
                        }
                        reported_requests = 0;
                        deletable.configure(&config);
                        checker = Some(Arc::new(Checker::new(config, Limits::default())));
                    }
                    unreadable = None;
                    next_read = Instant::now() + interval;
                }
                Err(e) => {
                    let unknown = e.unknown();
                    if unreadable.as_ref() != Some(&unknown) {
                        tracing::warn!(error = %e, "registry audit: cannot read how nodes pull");
                    }
                    unreadable = Some(unknown);
                    next_read = Instant::now() + RETRY.min(interval);
                }
            }
        }
        let mut snapshot = view.objects();
        snapshot.nodes = view.nodes(None, PolicyMode::InFlight);
        deletable
            .tick(&snapshot, unreadable.as_ref(), &metrics, interval)
            .await;
        let needed: Vec<NeededImage> = needed_images(&snapshot)
            .into_iter()
            .filter(NeededImage::counts)
            .collect();
        let wanted: BTreeSet<&str> = needed.iter().map(|n| n.image.as_str()).collect();
        known.retain(|image, _| wanted.contains(image.as_str()));
        let now = Instant::now();
        let due: Vec<String> = needed
            .iter()
            .filter(|n| known.get(&n.image).is_none_or(|k| k.due(now, interval)))
            .map(|n| n.image.clone())
            .collect();
        let answers: Vec<(String, Answer)> = match (&checker, &unreadable) {
            (Some(c), None) => c
                .check_all(&due)
                .await
                .into_iter()
                .map(|a| (a.image, a.verdict))
                .collect(),
            (_, Some(unknown)) => due.iter().map(|i| (i.clone(), unknown.clone())).collect(),
            (None, None) => Vec::new(),
        };
        if let Some(c) = &checker {
            let total = c.requests();
            metrics.registry_requests(total - reported_requests);
            reported_requests = total;
        }
        for (image, verdict) in answers {
            metrics.registry_check(verdict.status);
            let was = known.get(&image).map(|k| k.verdict.status);
            let failures = match verdict.status {
                Status::Available => 0,
                _ => known.get(&image).map_or(0, |k| k.failures) + 1,
            };
            if verdict.status == Status::Missing
                && was != Some(Status::Missing)
                && let Some(n) = needed.iter().find(|n| n.image == image)
            {
                tracing::warn!(image = %image, why = %verdict.why, "a needed image is missing from its registry");
                if metrics.is_leader() {
                    missing_events(&events, &snapshot, n, &verdict).await;
                }
            }
            known.insert(
                image,
                Known {
                    verdict,
                    at: Instant::now(),
                    failures,
                },
            );
        }
        let pools = snapshot.pools.iter().map(|p| p.name());
        let statuses = needed
            .iter()
            .filter_map(|n| known.get(&n.image).map(|k| (n, k.verdict.status)));
        metrics.needed_images(&pool_counts(pools, statuses));
    }
}

/// The Warning Events for an image that turned missing: on each MachineOSConfig of a pool
/// that needs it.
async fn missing_events(
    events: &Events,
    snapshot: &Snapshot,
    needed: &NeededImage,
    verdict: &Answer,
) {
    let pools = needed.pools();
    for mosc in &snapshot.machine_os_configs {
        let Some(need) = pools.get(mosc.pool_name()) else {
            continue;
        };
        let note = format!(
            "{} ({} in pool {}): {}",
            one_line(&needed.image, verdict),
            match need {
                Need::Pending => "a node is about to pull it",
                Need::Running => "nodes run it",
            },
            mosc.pool_name(),
            who(needed),
        );
        let regarding = reference(TargetKind::MachineOSConfig, mosc.name(), mosc.uid());
        events
            .record(&regarding, true, "NeededImageMissing", &note)
            .await;
    }
}

#[cfg(test)]
mod tests;
