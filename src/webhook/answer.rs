//! The answer to one validating request, from what was decided to the AdmissionReview sent
//! back, in this order: the words (a refusal's text, override warnings, defer mode's notes);
//! what the requester and the enforcement make of a refusal (MCO's own requests and
//! `--enforcement warn` admit it); its traces (the DeletionBlocked Event, the audit line, the
//! metrics); and the AdmissionResponse, built once.

use std::sync::Arc;
use std::time::Instant;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

use crate::access::view::ClusterView;
use crate::core::message::{self, Printable};
use crate::core::outcome::Outcome;
use crate::core::policy::{TargetKind, Verdict};
use crate::decision::{Checked, Enforcement};
use crate::telemetry::events::{self, Events, Refusal};
use crate::telemetry::metrics::Metrics;

pub(super) const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
pub(super) const REVIEW_KIND: &str = "AdmissionReview";

type Request = AdmissionRequest<DynamicObject>;

/// A guarded deletion (or an UPDATE that completes one) and what was decided about it.
#[derive(Debug)]
pub struct Guarded {
    pub kind: TargetKind,
    pub name: String,
    pub ruling: Ruling,
}

/// What was decided about a guarded deletion.
#[derive(Debug)]
pub enum Ruling {
    /// The request does not carry its object readably: refused, as unverified.
    Unreadable(Unreadable),
    /// Defer mode, and the finalizer holds the object: admitted; the cached verdict words the
    /// warning.
    Deferred(Verdict),
    /// The engine's verdict, or an allow it could not confirm; `why_refused` is added to a
    /// refusal (that the request removes the finalizer, or that defer mode could not hold the
    /// object).
    Checked {
        checked: Checked,
        why_refused: Option<String>,
    },
}

/// Why a guarded request's object could not be read from it.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("the request carries no oldObject")]
    NoOldObject,
    #[error("{0}")]
    Encode(serde_json::Error),
    #[error("oldObject does not decode: {0}")]
    Decode(serde_json::Error),
}

/// How refusals are answered and where answers leave their traces.
pub struct Answers {
    pub enforcement: Enforcement,
    /// DeletionBlocked Events; none when `serve` reads a dump.
    pub events: Option<Events>,
    metrics: Arc<Metrics>,
}

impl Answers {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            enforcement: Enforcement::Deny,
            events: None,
            metrics,
        }
    }

    /// Answers `req`, a guarded deletion decided as `guarded` or (`None`) a request the guard
    /// does not decide on, allowed untouched. `by_mco`: sent by one of MCO's users; `started`:
    /// when it arrived; `view`: the cache, which names the objects an Event may be about.
    pub fn answer(
        &self,
        req: &Request,
        guarded: Option<Guarded>,
        by_mco: bool,
        started: Instant,
        view: &dyn ClusterView,
    ) -> AdmissionResponse {
        let (resource, answer, event) = match guarded {
            None => ("other", Answer::allow(Outcome::Ignored, vec![]), None),
            Some(Guarded { kind, name, ruling }) => {
                let readable = !matches!(ruling, Ruling::Unreadable(_));
                let answer = Answer::of(kind, &name, ruling);
                let answer = match (by_mco, self.enforcement) {
                    (true, _) => answer.admitted_for_mco(),
                    (false, Enforcement::Deny) => answer,
                    (false, Enforcement::Warn) => answer.not_enforced(),
                };
                let event = readable
                    .then(|| self.refusal_event(req, kind, &answer, view))
                    .flatten();
                (kind.metric_label(), answer, event)
            }
        };
        let elapsed = started.elapsed();
        // Every field from the request is user input: the text format prints `%` fields as
        // they are, so control characters are escaped (the `&str` fields are printed quoted
        // and escaped by the formatter itself), and one decision stays one line.
        tracing::info!(
            uid = %Printable(&req.uid),
            resource = %Printable(&req.resource.resource),
            name = %Printable(&req.name),
            user = req.user_info.username.as_deref().unwrap_or_default(),
            mco = by_mco,
            dry_run = req.dry_run,
            override_reason = override_of(req).unwrap_or_default(),
            result = %answer.outcome.label(),
            blocking_nodes = answer.blocking_nodes,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "admission decision"
        );
        self.metrics
            .decision(resource, answer.outcome, elapsed.as_secs_f64());
        let response = answer.encode(req);
        if let (Some(events), Some(event)) = (&self.events, event) {
            events.refusal(event);
        }
        response
    }

    /// The DeletionBlocked Event of a refused deletion (DeletionWouldBeBlocked under
    /// `--enforcement warn`, DeletionByMCOAdmitted for MCO's), which [`Events::refusal`]
    /// rate-limits per object. Only about an object the cache has, under its real uid: a forged
    /// review of a made-up object gets its answer but writes nothing. Dry runs leave no trace.
    fn refusal_event(
        &self,
        req: &Request,
        kind: TargetKind,
        answer: &Answer,
        view: &dyn ClusterView,
    ) -> Option<Refusal> {
        let reason = match answer.outcome {
            Outcome::Denied | Outcome::Unconfirmed => events::REASON_BLOCKED,
            Outcome::WouldDeny => events::REASON_WOULD_BLOCK,
            Outcome::McoWouldDeny => events::REASON_MCO_ADMITTED,
            _ => return None,
        };
        if self.events.is_none() || req.dry_run {
            return None;
        }
        let sent_uid = req
            .old_object
            .as_ref()
            .and_then(|o| o.metadata.uid.as_deref());
        let snapshot = view.objects();
        let known_uid = match kind {
            TargetKind::MachineOSConfig => {
                snapshot.machine_os_config(&req.name).map(|o| &o.metadata)
            }
            TargetKind::MachineOSBuild => snapshot.machine_os_build(&req.name).map(|o| &o.metadata),
        }
        .and_then(|meta| meta.uid.as_deref());
        let Some(uid) = known_uid.filter(|uid| sent_uid == Some(uid)) else {
            tracing::debug!(name = %req.name, "no Event: the guard does not know this object");
            return None;
        };
        Some(Refusal {
            kind,
            name: req.name.clone(),
            uid: uid.to_string(),
            reason,
            note: answer.message.clone(),
        })
    }
}

/// The override annotation on the object being deleted, for the audit log: the new object of
/// an UPDATE (a finalizer's removal may set it in the same request), else the old one.
fn override_of(req: &Request) -> Option<&str> {
    req.object
        .as_ref()
        .or(req.old_object.as_ref())
        .and_then(|o| crate::core::model::override_reason(&o.metadata))
}

/// What one guarded request came to, typed: how it is counted (which says whether it is
/// allowed), the words the admin sees and the warnings.
#[derive(Debug)]
struct Answer {
    outcome: Outcome,
    /// A refusal's text (what `kubectl delete` prints); on an admitted would-be refusal, its
    /// words kept for the Event.
    message: String,
    /// Shown by `kubectl` as `Warning:` lines.
    warnings: Vec<String>,
    blocking_nodes: usize,
}

impl Answer {
    fn allow(outcome: Outcome, warnings: Vec<String>) -> Self {
        Self {
            outcome,
            message: String::new(),
            warnings,
            blocking_nodes: 0,
        }
    }

    fn deny(outcome: Outcome, message: String) -> Self {
        Self {
            outcome,
            message,
            warnings: Vec::new(),
            blocking_nodes: 0,
        }
    }

    /// The ruling on `kind` `name` in words.
    fn of(kind: TargetKind, name: &str, ruling: Ruling) -> Self {
        match ruling {
            Ruling::Unreadable(why) => Self::deny(
                Outcome::Unconfirmed,
                message::unverified(kind, name, &why.to_string()),
            ),
            Ruling::Deferred(verdict) => Self::deferred(&verdict),
            Ruling::Checked {
                checked,
                why_refused,
            } => {
                let answer = match checked {
                    Checked::Decided(verdict) => Self::from_verdict(&verdict),
                    Checked::Unconfirmed { cached, why } => {
                        let why = why.to_string();
                        if let Some(reason) = cached.override_reason.as_deref() {
                            tracing::warn!(name = %Printable(name), %why, "could not confirm an allow; allowed by override");
                            let warning = message::unverified_override(kind, name, &why, reason);
                            Self::allow(Outcome::Overridden, vec![warning])
                        } else {
                            tracing::warn!(name = %Printable(name), reason = %why, "could not confirm an allow; denying");
                            Self::deny(Outcome::Unconfirmed, message::unverified(kind, name, &why))
                        }
                    }
                };
                answer.explain(why_refused.as_deref().unwrap_or_default())
            }
        }
    }

    /// The verdict as the answer: refused with the denial's text, allowed by an override with
    /// its warnings, or allowed; the release rules' note as a warning either way.
    fn from_verdict(verdict: &Verdict) -> Self {
        let note: Vec<String> = verdict
            .rules
            .note()
            .map(|n| message::clip_to(format!("mosc-guard: {n}"), 256))
            .into_iter()
            .collect();
        let answer = if !verdict.allowed {
            Self {
                warnings: note,
                ..Self::deny(Outcome::Denied, message::denial(verdict))
            }
        } else if verdict.overridden() {
            let mut warnings = message::override_warnings(verdict);
            warnings.extend(note);
            Self::allow(Outcome::Overridden, warnings)
        } else {
            Self::allow(Outcome::Allowed, note)
        };
        answer.blocking(verdict)
    }

    /// Defer mode with the finalizer in place: allowed, with a warning while nodes still block.
    fn deferred(verdict: &Verdict) -> Self {
        if verdict.allowed {
            return Self::from_verdict(verdict);
        }
        Self::allow(Outcome::Deferred, vec![message::deferred(verdict)]).blocking(verdict)
    }

    fn blocking(mut self, verdict: &Verdict) -> Self {
        self.blocking_nodes = verdict.blocking.len();
        self
    }

    /// `--enforcement warn`: a refusal becomes an allow that carries the refusal's text as
    /// warnings (one per line, as the API server shows them), marked as not enforced.
    fn not_enforced(self) -> Self {
        if !self.outcome.refuses() {
            return self;
        }
        let mut warnings = vec![
            "mosc-guard (--enforcement warn): this deletion would have been refused; it was admitted"
                .to_string(),
        ];
        warnings.extend(
            self.message
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| message::clip_to(format!("mosc-guard: {}", l.trim()), 256)),
        );
        warnings.extend(self.warnings);
        Self {
            outcome: Outcome::WouldDeny,
            warnings,
            // The refusal's words also go to the Event, as for an enforced refusal.
            ..self
        }
    }

    /// MCO's own request: admitted whatever the verdict. A refusal becomes an allow counted as
    /// `mco-would-deny`, its words kept for the Event that says the guard let MCO through.
    fn admitted_for_mco(self) -> Self {
        if !self.outcome.refuses() {
            return self;
        }
        Self {
            outcome: Outcome::McoWouldDeny,
            message: message::admitted_for_mco(&self.message),
            warnings: vec![
                "mosc-guard: admitted as MCO's own request (--mco-user); it would have refused it"
                    .to_string(),
            ],
            blocking_nodes: self.blocking_nodes,
        }
    }

    fn allowed(&self) -> bool {
        !self.outcome.refuses()
    }

    /// Adds `why` to a refusal (why it could not be deferred, or that it was a finalizer's
    /// removal).
    fn explain(mut self, why: &str) -> Self {
        if !self.allowed() {
            self.message.push_str(why);
        }
        self
    }

    /// The AdmissionResponse for `req`.
    fn encode(self, req: &Request) -> AdmissionResponse {
        if self.allowed() {
            let mut response = allow(req, self.warnings);
            response.result.message = self.message;
            response
        } else {
            let mut response = deny(req, self.message);
            if !self.warnings.is_empty() {
                response.warnings = Some(self.warnings);
            }
            response
        }
    }
}

/// Allows the request, with optional warnings for the client.
pub fn allow(req: &Request, warnings: Vec<String>) -> AdmissionResponse {
    let mut resp = AdmissionResponse::from(req);
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp
}

/// Denies the request with 403 and a message the admin sees on `kubectl delete`.
fn deny(req: &Request, message: String) -> AdmissionResponse {
    let mut resp = AdmissionResponse::from(req).deny(message);
    resp.result.code = 403;
    resp.result.reason = "Forbidden".to_string();
    resp
}

/// Wraps a response into the review the API server expects back.
pub fn into_review(resp: AdmissionResponse) -> AdmissionReview<DynamicObject> {
    let mut review = resp.into_review();
    review.types.api_version = REVIEW_API_VERSION.to_string();
    review.types.kind = REVIEW_KIND.to_string();
    review
}

#[cfg(test)]
mod tests;
