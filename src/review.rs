//! Answers one admission request: classify it, decide from the cache, and confirm
//! every would-be allow with a fresh read, so a stale cache can delay a deletion but
//! cannot allow one that is dangerous at admission time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use kube::core::admission::AdmissionResponse;

use crate::admission::{self, Classified, Request, Subject};
use crate::message;
use crate::metrics::{Metrics, Outcome};
use crate::policy::{self, PolicyMode, TargetKind, Verdict};
use crate::snapshot::Snapshot;
use crate::view::ClusterView;

/// Confirming reads allowed at once. Each lists every node; when garbage collection
/// deletes many builds together, the rest wait (within their timeout) instead of
/// multiplying the load on the API server and the guard's memory.
const CONCURRENT_CONFIRMATIONS: usize = 2;

pub struct Reviewer<V> {
    pub view: V,
    pub mode: PolicyMode,
    pub metrics: Arc<Metrics>,
    /// Upper bound for the confirming read, waiting for a turn included; past it the
    /// guard fails closed.
    pub confirm_timeout: Duration,
    confirmations: Semaphore,
}

impl<V: ClusterView> Reviewer<V> {
    pub fn new(
        view: V,
        mode: PolicyMode,
        metrics: Arc<Metrics>,
        confirm_timeout: Duration,
    ) -> Self {
        Self {
            view,
            mode,
            metrics,
            confirm_timeout,
            confirmations: Semaphore::new(CONCURRENT_CONFIRMATIONS),
        }
    }

    pub async fn review(&self, req: &Request) -> AdmissionResponse {
        let started = Instant::now();
        let (resource, outcome, resp) = match admission::classify(req) {
            Classified::Ignore => ("other", Outcome::ignored, admission::allow(req, vec![])),
            Classified::Delete {
                kind,
                name,
                subject,
            } => {
                let (outcome, resp) = self.deletion(req, kind, &name, subject).await;
                (kind.metric_label(), outcome, resp)
            }
        };
        tracing::info!(
            uid = %req.uid,
            resource = %req.resource.resource,
            name = %req.name,
            user = req.user_info.username.as_deref().unwrap_or_default(),
            dry_run = req.dry_run,
            override_reason = override_of(req).unwrap_or_default(),
            result = ?outcome,
            "admission decision"
        );
        self.metrics
            .decision(resource, outcome, started.elapsed().as_secs_f64());
        resp
    }

    async fn deletion(
        &self,
        req: &Request,
        kind: TargetKind,
        name: &str,
        subject: Result<Subject, String>,
    ) -> (Outcome, AdmissionResponse) {
        let subject = match subject {
            Ok(s) => s,
            Err(why) => {
                let msg = message::unverified(kind, name, &why);
                return (Outcome::unverified, admission::deny(req, msg));
            }
        };
        let mut snapshot = self.view.objects();
        let digests = policy::guarded_digests(&snapshot, subject.as_deletion());
        snapshot.nodes = self.view.nodes(digests.as_ref(), self.mode);
        let cached = self.evaluate(&snapshot, &subject);
        if !cached.allowed || cached.overridden() {
            return respond(req, &cached);
        }
        // A build without an image guards nothing whatever the nodes say: no read needed.
        // (A config's images depend on builds the cache may not have seen, so it is read.)
        let imageless_build = matches!(subject, Subject::Build(_)) && cached.images.is_empty();
        if imageless_build {
            return respond(req, &cached);
        }
        let fresh = tokio::time::timeout(self.confirm_timeout, async {
            let _turn = self.confirmations.acquire().await;
            self.view.fresh().await
        });
        match fresh.await {
            Ok(Ok(fresh)) => {
                let verdict = self.evaluate(&fresh, &subject);
                let result = if verdict.allowed && !verdict.overridden() {
                    "confirmed"
                } else {
                    "overturned"
                };
                self.metrics.confirmation(result);
                respond(req, &verdict)
            }
            failed => {
                self.metrics.confirmation("failed");
                let why = match failed {
                    Ok(Err(e)) => {
                        format!("reading nodes and builds from the API server failed: {e}")
                    }
                    _ => format!(
                        "reading nodes and builds from the API server took longer than {}s",
                        self.confirm_timeout.as_secs_f32()
                    ),
                };
                if let Some(reason) = cached.override_reason.as_deref() {
                    tracing::warn!(%name, %why, "could not confirm an allow; allowed by override");
                    let warning = message::unverified_override(kind, name, &why, reason);
                    return (Outcome::overridden, admission::allow(req, vec![warning]));
                }
                tracing::warn!(%name, reason = %why, "could not confirm an allow; denying");
                let msg = message::unverified(kind, name, &why);
                (Outcome::unverified, admission::deny(req, msg))
            }
        }
    }

    fn evaluate(&self, snapshot: &Snapshot, subject: &Subject) -> Verdict {
        policy::evaluate(snapshot, subject.as_deletion(), self.mode)
    }
}

fn respond(req: &Request, verdict: &Verdict) -> (Outcome, AdmissionResponse) {
    if !verdict.allowed {
        (
            Outcome::denied,
            admission::deny(req, message::denial(verdict)),
        )
    } else if verdict.overridden() {
        (
            Outcome::overridden,
            admission::allow(req, message::override_warnings(verdict)),
        )
    } else {
        (Outcome::allowed, admission::allow(req, vec![]))
    }
}

/// The override annotation on the object being deleted, for the audit log.
fn override_of(req: &Request) -> Option<&str> {
    req.old_object
        .as_ref()
        .and_then(|o| crate::model::override_reason(&o.metadata))
}
