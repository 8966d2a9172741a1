//! The audit's count of deletable images (`mosc_guard_deletable_images{machineosconfig}`): what
//! `prune --apply --images` would delete, counted with the nodes' pull secret, never the push
//! secret (docs/security.md). Once per interval, on a task of its own: the repositories prune would
//! list, each listed one at a time with prune's bounds and within the interval (a minute at least),
//! planned by prune's own code and counted per MachineOSConfig. A repository not listed gives its
//! configs no count. The internal registry is told by host names only (its Services and Routes are
//! beyond `serve`'s RBAC); mirrors are not listed (they serve pulls by digest, not tag lists).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::access::registry::Limits;
use crate::access::registry::session::Session;
use crate::access::registry::tags::TagReader;
use crate::core::prune::images::{
    ConfigImages, ImagePlan, per_config, plan_images, push_repositories,
};
use crate::core::registry::Answer;
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::Listing;
use crate::core::registry::node_config::PullConfig;
use crate::core::snapshot::Snapshot;
use crate::telemetry::metrics::Metrics;

/// The least time a repository's listing may take before it counts as not listed.
const MIN_BOUND: Duration = Duration::from_secs(60);

/// What one round found.
struct Round {
    plan: ImagePlan,
    snapshot: Snapshot,
    requests: u64,
    tags: u64,
}

/// Counts deletable images once per interval; owned by the audit's loop.
pub(super) struct Counter {
    /// The nodes' pull configuration's session, for the configuration in use.
    session: Option<Arc<Session>>,
    running: Option<JoinHandle<Round>>,
    next: Instant,
    /// Why each config had no count at the last round (logged when it changes).
    unknown: BTreeMap<String, String>,
}

impl Counter {
    pub(super) fn new() -> Self {
        Counter {
            session: None,
            running: None,
            next: Instant::now(),
            unknown: BTreeMap::new(),
        }
    }

    /// A new pull configuration: the next round lists with it.
    pub(super) fn configure(&mut self, config: &PullConfig) {
        self.session = Some(Arc::new(Session::new(config.clone(), Limits::default())));
    }

    /// Publishes a finished round, and starts the next when due: listing with the session, or,
    /// while the pull configuration cannot be read (`unreadable`: the answer it gives), every
    /// config unknown.
    pub(super) async fn tick(
        &mut self,
        snapshot: &Snapshot,
        unreadable: Option<&Answer>,
        metrics: &Metrics,
        interval: Duration,
    ) {
        if let Some(running) = self.running.take_if(|r| r.is_finished()) {
            match running.await {
                Ok(round) => {
                    metrics.registry_requests(round.requests);
                    metrics.registry_tags_resolved(round.tags);
                    self.publish(&round.snapshot, &round.plan, metrics);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "registry audit: counting deletable images failed")
                }
            }
        }
        if self.running.is_some() || Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + interval;
        match (unreadable, &self.session) {
            (Some(unknown), _) => {
                let plan = ImagePlan::skipped(unknown.why.clone());
                self.publish(snapshot, &plan, metrics);
            }
            (None, Some(session)) => {
                self.running = Some(tokio::spawn(round(
                    Arc::clone(session),
                    snapshot.clone(),
                    interval.max(MIN_BOUND),
                )));
            }
            (None, None) => {}
        }
    }

    fn publish(&mut self, snapshot: &Snapshot, plan: &ImagePlan, metrics: &Metrics) {
        let counts = per_config(snapshot, plan);
        let mut unknown = BTreeMap::new();
        for (config, count) in &counts {
            if let ConfigImages::NotListed { repository, why } = count {
                let why = if repository.is_empty() {
                    why.clone()
                } else {
                    format!("{repository}: {why}")
                };
                if self.unknown.get(config) != Some(&why) {
                    tracing::warn!(machineosconfig = %config, why = %why,
                        "registry audit: cannot count the deletable images of a MachineOSConfig");
                }
                unknown.insert(config.clone(), why);
            }
        }
        self.unknown = unknown;
        metrics.deletable_images(counts.into_iter().map(|(c, n)| (c, n.count())));
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.abort();
        }
    }
}

/// Lists every repository of `snapshot`, one at a time, and plans them.
async fn round(session: Arc<Session>, snapshot: Snapshot, bound: Duration) -> Round {
    let before = session.requests();
    let reader = TagReader::new(Arc::clone(&session));
    let mut listings = Vec::new();
    for source in push_repositories(&snapshot) {
        // serve has no right to openshift-image-registry's Services and Routes: the host's form
        // alone tells (a Route with a host of its own counts as deletable here, not in prune).
        let internal = Internal::of(&source.host, Ok(&[]));
        let listing = tokio::time::timeout(bound, reader.listing(&source, internal.clone()))
            .await
            .unwrap_or_else(|_| Listing {
                source,
                internal,
                tags: Err(format!("not listed within {} s", bound.as_secs())),
            });
        listings.push(listing);
    }
    let tags = listings
        .iter()
        .filter_map(|l| l.tags.as_ref().ok())
        .map(|t| u64::try_from(t.len()).unwrap_or(u64::MAX))
        .sum();
    Round {
        plan: plan_images(&snapshot, &listings),
        snapshot,
        requests: session.requests() - before,
        tags,
    }
}
