//! The decision engine: the verdict on one deletion from the caches, confirmed by a fresh read
//! whichever way it went; concurrent requests share the read ([`coalesce`]) and, for the same
//! target, the decisions: the cached one while it runs, and the one on the read
//! ([`confirmation`], [`sharing`]). The admission review and the finalizer controller both
//! decide through [`Engine::check`]; what they do with the verdict (answer a request, remove a
//! finalizer) is theirs. `/metrics`' cluster gauges are the engine's too ([`gauges`]).

pub mod coalesce;
pub mod confirmation;
mod gauges;
pub mod modes;
pub mod sharing;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::access::error::FreshError;
use crate::access::view::{Basis, ClusterView, ReadSteps};
use crate::core::policy::{self, Deletion, PolicyMode, Verdict};
use crate::core::snapshot::Snapshot;
use crate::telemetry::metrics::{DecisionPhase, Metrics, ReadStep};
use coalesce::Coalesced;
use confirmation::Confirmation;
use sharing::SharedVerdicts;

pub use modes::{DeletionMode, Enforcement};

/// A verdict confirmed as far as the guard could.
#[derive(Debug)]
pub enum Checked {
    /// Decided: on a fresh read (the cache's verdict confirmed or overturned), or without one
    /// when an override lets it through, it is a build MCO deletes no image for, or the cache
    /// refuses it and the read failed.
    Decided(Verdict),
    /// A would-be allow that the fresh read could not confirm.
    Unconfirmed { cached: Verdict, why: FreshError },
}

/// A verdict from the caches, and what it was decided on (`None` where the view cannot tell).
#[derive(Clone, Debug)]
struct FromCaches {
    verdict: Verdict,
    basis: Option<Basis>,
}

/// The cluster view, the policy mode and the shared confirming reads.
pub struct Engine<V> {
    /// Shared with the confirming reads, which run on tasks of their own.
    pub view: Arc<V>,
    pub mode: PolicyMode,
    pub metrics: Arc<Metrics>,
    /// Upper bound for the confirming read, waiting for a turn included; past it the
    /// guard fails closed.
    pub confirm_timeout: Duration,
    /// Confirming reads, coalesced: a burst of requests shares reads (see [`Coalesced`]), and
    /// the requests one read serves share its verdict per target (see [`Confirmation`]).
    confirmations: Coalesced<Result<Confirmation, FreshError>>,
    /// Cached decisions running now: concurrent requests for one target share one.
    deciding: SharedVerdicts<FromCaches>,
    /// Verdicts decided on confirming reads (the tests count them).
    #[cfg(test)]
    fresh_decisions: std::sync::atomic::AtomicUsize,
}

impl<V: ClusterView> Engine<V> {
    pub fn new(
        view: V,
        mode: PolicyMode,
        metrics: Arc<Metrics>,
        confirm_timeout: Duration,
    ) -> Self {
        Self {
            view: Arc::new(view),
            mode,
            metrics,
            confirm_timeout,
            confirmations: Coalesced::default(),
            deciding: SharedVerdicts::default(),
            #[cfg(test)]
            fresh_decisions: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// How long a confirming read waits, after the request that starts it arrived, for
    /// concurrent requests to share it (see [`Coalesced`]; zero: it starts at once).
    pub fn with_confirm_batch_window(mut self, window: Duration) -> Self {
        self.confirmations = Coalesced::with_window(window);
        self
    }

    /// Records the phase that started at `started` and returns when the next one starts.
    fn phase_ended(&self, phase: DecisionPhase, started: Instant) -> Instant {
        let now = Instant::now();
        self.metrics.decision_phase(phase, now - started);
        now
    }

    /// The verdict from the caches alone. When the pool rule needs every node (an unpaused
    /// pool targets a guarded image), the index's candidates are tried first: a node among them
    /// that blocks by itself decides a denial without the scan.
    pub fn cached(&self, target: Deletion<'_>) -> Verdict {
        self.decide_cached(&self.view.objects(), target)
    }

    fn decide_cached(&self, objects: &Snapshot, target: Deletion<'_>) -> Verdict {
        policy::evaluate_indexed(objects, target, self.mode, |digests| {
            self.view.nodes(digests, self.mode)
        })
    }

    /// [`Engine::cached`], with what it was decided on: the node cache's generation is read
    /// before any node, so a read that later finds the same generation (and the same objects)
    /// shows exactly what this verdict read.
    fn cached_with_basis(&self, target: Deletion<'_>) -> FromCaches {
        let nodes = self.view.node_generation();
        let objects = self.view.objects();
        let verdict = self.decide_cached(&objects, target);
        let basis = objects
            .versions()
            .zip(nodes)
            .map(|(objects, nodes)| Basis { objects, nodes });
        FromCaches { verdict, basis }
    }

    /// The verdict from the caches, confirmed by a fresh read of nodes, builds, pools and
    /// MachineOSConfigs whichever way it went: a would-be allow, so a stale cache can delay a
    /// deletion but never let a dangerous one go; and a would-be refusal, so a delete right
    /// after `oc get mcp` shows the pool settled is not refused on a cache a few milliseconds
    /// behind. A refusal whose read fails stands (failing closed).
    pub async fn check(&self, target: Deletion<'_>) -> Checked {
        self.check_within(target, self.confirm_timeout).await
    }

    /// [`Engine::check`] with its own bound for the confirming read (the finalizer
    /// controller has no webhook deadline to meet, so it waits longer than a request can).
    pub async fn check_within(&self, target: Deletion<'_>, confirm_timeout: Duration) -> Checked {
        let arrival = self.confirmations.arrive();
        let phase = Instant::now();
        // Settled by the request alone: a build without MCO's `machine-os-config` label has no
        // image MCO would delete. Every other request's confirming read starts now, on a task
        // of its own, and is in flight while the verdict from the caches is computed here.
        let unlabelled_build =
            matches!(target, Deletion::MachineOSBuild(b) if b.config_label().is_none());
        let read = (!unlabelled_build).then(|| {
            let (view, metrics) = (Arc::clone(&self.view), Arc::clone(&self.metrics));
            self.confirmations.start_since(arrival, move || async move {
                let fresh = view.fresh().await?;
                record_steps(&metrics, &fresh.steps);
                Ok(Confirmation::new(fresh))
            })
        });
        if read.is_some() {
            // A task spawned from a worker waits in that worker's next-task slot, which other
            // workers do not take: let it start (issue its requests, or wait out the window on
            // the timer) before this worker spends itself on the verdict from the caches.
            tokio::task::yield_now().await;
        }
        let FromCaches {
            verdict: cached,
            basis,
        } = self
            .deciding
            .while_deciding(target, || self.cached_with_basis(target))
            .await;
        let phase = self.phase_ended(DecisionPhase::Cached, phase);
        // The override lets a blocked deletion through whatever the read says (dropping the
        // read's handle aborts it if no other request waits for it).
        let Some(read) = read.filter(|_| !cached.overridden()) else {
            return Checked::Decided(cached);
        };
        let read = match tokio::time::timeout(confirm_timeout, read.wait()).await {
            Ok((result, started)) => {
                // The wait for a turn (or the window), then the read itself.
                let read_from = started.max(phase);
                self.metrics
                    .decision_phase(DecisionPhase::Wait, read_from - phase);
                self.phase_ended(DecisionPhase::Read, read_from);
                Ok(result)
            }
            Err(elapsed) => {
                self.phase_ended(DecisionPhase::Read, phase);
                Err(elapsed)
            }
        };
        let phase = Instant::now();
        match read.as_deref() {
            Ok(Ok(confirmation)) => {
                self.metrics
                    .confirmation_nodes(confirmation.fresh().source());
                // Decided once for every request this read serves with the same target: the
                // cached verdict itself when the read shows exactly what it was decided on.
                let verdict = confirmation
                    .verdict(target, |fresh| {
                        if basis.as_ref().is_some_and(|b| fresh.shows(b, &*self.view)) {
                            self.metrics.confirmation_unchanged();
                            return cached.clone();
                        }
                        #[cfg(test)]
                        self.fresh_decisions
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        fresh.decide(&*self.view, target, self.mode)
                    })
                    .await;
                self.phase_ended(DecisionPhase::Fresh, phase);
                let result = match (cached.allowed, verdict.allowed && !verdict.overridden()) {
                    (true, true) => "confirmed",
                    (true, false) => "overturned",
                    (false, false) => "refusal-confirmed",
                    (false, true) => "refusal-overturned",
                };
                self.metrics.confirmation(result);
                Checked::Decided(verdict)
            }
            failed => {
                self.metrics.confirmation("failed");
                if !cached.allowed {
                    // The cache refuses and no read says otherwise: the refusal stands.
                    return Checked::Decided(cached);
                }
                let why = match failed {
                    Ok(Err(e)) => e.clone(),
                    _ => FreshError::Timeout(confirm_timeout),
                };
                Checked::Unconfirmed { cached, why }
            }
        }
    }
}

/// Records a confirming read's steps, once per read.
fn record_steps(metrics: &Metrics, steps: &ReadSteps) {
    metrics.read_step(ReadStep::Lists, steps.lists);
    metrics.read_step(ReadStep::Revision, steps.revision);
    if let Some(took) = steps.catch_up {
        metrics.read_step(ReadStep::CatchUp, took);
    }
    if let Some(took) = steps.node_list {
        metrics.read_step(ReadStep::NodeList, took);
    }
}
