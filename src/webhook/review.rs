//! Answers one admission request: classify it, decide from the cache, and confirm
//! every would-be allow with a fresh read, so a stale cache can delay a deletion but
//! cannot allow one that is dangerous at admission time. In defer mode a MachineOSConfig
//! that carries the finalizer is let through with a warning: the finalizer holds it.
//!
//! [`Reviewer::check`] is the one decision path; the finalizer controller uses it too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::admission::AdmissionResponse;

use crate::core::finalizer;
use crate::core::message;
use crate::core::message::Printable;
use crate::core::policy::{self, Deletion, PolicyMode, TargetKind, Verdict};
use crate::sources::error::FreshError;
use crate::sources::view::{ClusterView, Fresh};
use crate::telemetry::events::{self, Events};
use crate::telemetry::metrics::{Metrics, Outcome};
use crate::webhook::admission::{self, Classified, Request, Subject};
use crate::webhook::coalesce::Coalesced;
use crate::webhook::event_limiter::{Admit, EventLimiter};

/// How a MachineOSConfig deletion that nodes still block is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DeletionMode {
    /// Refuse it, naming the nodes; the admin deletes again later.
    #[default]
    Deny,
    /// Accept it; the finalizer holds the object until the rollout settles.
    Defer,
}

/// Whether refusals are enforced: `warn` admits what would be refused, with the refusal as
/// warnings, a `would-deny` count and a Warning Event, so a site can try the guard first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Enforcement {
    #[default]
    Deny,
    Warn,
}

/// A verdict confirmed as far as the guard could.
#[derive(Debug)]
pub enum Checked {
    /// Settled without a fresh read: an override lets it through, it is a build MCO deletes no
    /// image for, or the cache refuses it and the read failed.
    Decided(Verdict),
    /// Decided on a fresh read (the cache's verdict confirmed or overturned).
    Confirmed(Verdict),
    /// A would-be allow that the fresh read could not confirm.
    Unverified { cached: Verdict, why: FreshError },
}

pub struct Reviewer<V> {
    pub view: V,
    pub mode: PolicyMode,
    pub metrics: Arc<Metrics>,
    /// Upper bound for the confirming read, waiting for a turn included; past it the
    /// guard fails closed.
    pub confirm_timeout: Duration,
    deletion_mode: DeletionMode,
    enforcement: Enforcement,
    no_new_finalizers: bool,
    events: Option<Events>,
    /// Confirming reads, coalesced: a burst of requests shares reads (see [`Coalesced`]).
    confirmations: Coalesced<Result<Fresh, FreshError>>,
    /// Per-object rate limit of DeletionBlocked Events.
    event_limiter: EventLimiter,
    /// Users whose requests are MCO's own (`--mco-user`): never refused (see [`McoUsers`]).
    mco_users: McoUsers,
}

/// The users MCO's machine-os-builder runs as (`--mco-user`). Every MachineOSBuild deletion it
/// makes itself (superseding a build that has not succeeded, rebuilding one whose image is
/// gone, the rebuild annotation, the cleanup after a MachineOSConfig's deletion) protects no
/// image when refused: by then MCO has deleted the image or it never existed, and a refusal
/// only stops its build pipeline (a refused `deleteOtherBuildsForMachineOSConfig` aborts every
/// new build, forever). So the guard admits all of its requests, whatever they are, and says
/// so when it would have refused one.
#[derive(Clone, Debug, Default)]
pub struct McoUsers(Vec<String>);

impl McoUsers {
    /// These users (blank names are dropped, so `--mco-user=` exempts nobody).
    pub fn new<I: IntoIterator<Item = String>>(users: I) -> Self {
        Self(
            users
                .into_iter()
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .collect(),
        )
    }

    /// MCO's machine-os-builder alone: the default, as `serve --mco-user` has it.
    pub fn machine_os_builder() -> Self {
        Self::new([crate::core::model::MACHINE_OS_BUILDER_USER.to_string()])
    }

    /// Whether `req` was sent by one of them.
    pub fn sent(&self, req: &Request) -> bool {
        req.user_info
            .username
            .as_deref()
            .is_some_and(|u| self.0.iter().any(|m| m == u))
    }
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
            deletion_mode: DeletionMode::Deny,
            enforcement: Enforcement::Deny,
            no_new_finalizers: false,
            events: None,
            confirmations: Coalesced::default(),
            event_limiter: EventLimiter::default(),
            mco_users: McoUsers::machine_os_builder(),
        }
    }

    /// Admits every request of these users, MCO's own (see [`McoUsers`]; by default the
    /// machine-os-builder).
    pub fn with_mco_users(mut self, users: McoUsers) -> Self {
        self.mco_users = users;
        self
    }

    /// Answers MachineOSConfig deletions as `mode` says.
    pub fn with_deletion_mode(mut self, mode: DeletionMode) -> Self {
        self.deletion_mode = mode;
        self
    }

    /// Enforces refusals, or only warns of them.
    pub fn with_enforcement(mut self, enforcement: Enforcement) -> Self {
        self.enforcement = enforcement;
        self
    }

    /// Stops adding the finalizer (draining before an uninstall); deferred deletions still
    /// complete.
    pub fn without_new_finalizers(mut self) -> Self {
        self.no_new_finalizers = true;
        self
    }

    /// Whether the mutating webhook and the controller add the finalizer: defer mode only.
    pub fn adds_finalizers(&self) -> bool {
        self.deletion_mode == DeletionMode::Defer && !self.no_new_finalizers
    }

    /// How long a confirming read waits, after the request that starts it arrived, for
    /// concurrent requests to share it (see [`Coalesced`]; zero: it starts at once).
    pub fn with_confirm_batch_window(mut self, window: Duration) -> Self {
        self.confirmations = Coalesced::with_window(window);
        self
    }

    /// Records a DeletionBlocked Event for every refused deletion that is not a dry run.
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = Some(events);
        self
    }

    pub async fn review(&self, req: &Request) -> AdmissionResponse {
        let started = Instant::now();
        let (resource, decided) = match admission::classify(req) {
            Classified::Ignore => (
                "other",
                Decision::new(Outcome::ignored, admission::allow(req, vec![])),
            ),
            Classified::Delete {
                kind,
                name,
                subject,
                finalizer_release,
            } => {
                let decodable = subject.is_ok();
                let decided = self
                    .deletion(req, kind, &name, subject, finalizer_release)
                    .await;
                let decided = if self.mco_users.sent(req) {
                    decided.admitted_for_mco(req)
                } else {
                    match self.enforcement {
                        Enforcement::Deny => decided,
                        Enforcement::Warn => decided.not_enforced(req),
                    }
                };
                if decodable {
                    self.record_refusal(req, kind, &decided);
                }
                (kind.metric_label(), decided)
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
            mco = self.mco_users.sent(req),
            dry_run = req.dry_run,
            override_reason = override_of(req).unwrap_or_default(),
            result = %decided.outcome.label(),
            blocking_nodes = decided.blocking_nodes,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "admission decision"
        );
        self.metrics
            .decision(resource, decided.outcome, elapsed.as_secs_f64());
        decided.response
    }

    async fn deletion(
        &self,
        req: &Request,
        kind: TargetKind,
        name: &str,
        subject: Result<Subject, String>,
        finalizer_release: bool,
    ) -> Decision {
        let subject = match subject {
            Ok(s) => s,
            Err(why) => {
                let msg = message::unverified(kind, name, &why);
                return Decision::new(Outcome::unverified, admission::deny(req, msg));
            }
        };
        let deferrable = match &subject {
            Subject::Config(c) => {
                self.deletion_mode == DeletionMode::Defer && finalizer::has(&c.metadata)
            }
            Subject::Build(_) => false,
        };
        if deferrable {
            // The finalizer keeps the object (and so its images) until the controller
            // confirms with a fresh read; the cache only words the warning.
            return deferred(req, &self.cached(subject.as_deletion()));
        }
        let decided = match self.check(subject.as_deletion()).await {
            Checked::Decided(verdict) | Checked::Confirmed(verdict) => respond(req, &verdict),
            Checked::Unverified { cached, why } => {
                if let Some(reason) = cached.override_reason.as_deref() {
                    tracing::warn!(name = %Printable(name), %why, "could not confirm an allow; allowed by override");
                    let warning =
                        message::unverified_override(kind, name, &why.to_string(), reason);
                    Decision::new(Outcome::overridden, admission::allow(req, vec![warning]))
                } else {
                    tracing::warn!(name = %Printable(name), reason = %why, "could not confirm an allow; denying");
                    let msg = message::unverified(kind, name, &why.to_string());
                    Decision::new(Outcome::unverified, admission::deny(req, msg))
                }
            }
        };
        if finalizer_release {
            return decided.explain(&message::finalizer_release());
        }
        if self.deletion_mode == DeletionMode::Defer && kind == TargetKind::MachineOSConfig {
            return decided.explain(&message::not_deferrable());
        }
        decided
    }

    /// The verdict from the caches alone. When the pool rule needs every node (an unpaused
    /// pool targets a guarded image), the index's candidates are tried first: a node among them
    /// that blocks by itself decides a denial without the scan.
    pub fn cached(&self, target: Deletion<'_>) -> Verdict {
        policy::evaluate_indexed(&self.view.objects(), target, self.mode, |digests| {
            self.view.nodes(digests, self.mode)
        })
    }

    /// The verdict from the caches, confirmed by a fresh read of nodes, builds, pools and
    /// MachineOSConfigs whichever way it went: a would-be allow, so a stale cache can delay a
    /// deletion but never let a dangerous one go; and a would-be refusal, so a delete right
    /// after `oc get mcp` shows the pool settled is not refused on a cache a few milliseconds
    /// behind. A refusal whose read fails stands (failing closed).
    pub async fn check(&self, target: Deletion<'_>) -> Checked {
        self.check_within(target, self.confirm_timeout).await
    }

    /// [`Reviewer::check`] with its own bound for the confirming read (the finalizer
    /// controller has no webhook deadline to meet, so it waits longer than a request can).
    pub async fn check_within(&self, target: Deletion<'_>, confirm_timeout: Duration) -> Checked {
        // Before the cached decision: a confirming read that starts while it runs began after
        // this request arrived, so it may confirm it (concurrent allows share one read).
        let arrival = self.confirmations.arrive();
        let cached = self.cached(target);
        // Settled by the request alone: the override lets a blocked deletion through whatever
        // the read says, and a build without MCO's `machine-os-config` label has no image MCO
        // would delete.
        let unlabelled_build =
            matches!(target, Deletion::MachineOSBuild(b) if b.config_label().is_none());
        if cached.overridden() || unlabelled_build {
            return Checked::Decided(cached);
        }
        let fresh = tokio::time::timeout(
            confirm_timeout,
            self.confirmations.get_since(arrival, || self.view.fresh()),
        );
        match fresh.await.as_deref() {
            Ok(Ok(fresh)) => {
                self.metrics.confirmation_nodes(fresh.source());
                let snapshot = fresh.snapshot_for(&self.view, target, self.mode);
                let verdict = policy::evaluate(&snapshot, target, self.mode);
                let result = match (cached.allowed, verdict.allowed && !verdict.overridden()) {
                    (true, true) => "confirmed",
                    (true, false) => "overturned",
                    (false, false) => "refusal-confirmed",
                    (false, true) => "refusal-overturned",
                };
                self.metrics.confirmation(result);
                Checked::Confirmed(verdict)
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
                Checked::Unverified { cached, why }
            }
        }
    }

    /// A DeletionBlocked Event for a refused deletion (DeletionWouldBeBlocked under
    /// `--enforcement warn`), recorded in the background so the answer to the API server does
    /// not wait for it. Dry runs leave no trace.
    fn record_refusal(&self, req: &Request, kind: TargetKind, decided: &Decision) {
        let reason = match decided.outcome {
            Outcome::denied | Outcome::unverified => events::REASON_BLOCKED,
            Outcome::would_deny => events::REASON_WOULD_BLOCK,
            Outcome::mco_would_deny => events::REASON_MCO_ADMITTED,
            _ => return,
        };
        let Some(events) = self.events.clone().filter(|_| !req.dry_run) else {
            return;
        };
        // Only about an object the cache has, under its real uid: a forged review of a made-up
        // object gets its answer but writes nothing.
        let sent_uid = req.old_object.as_ref().and_then(|o| o.metadata.uid.clone());
        let Some(uid) = self
            .known_uid(kind, &req.name)
            .filter(|uid| sent_uid.as_ref() == Some(uid))
        else {
            tracing::debug!(name = %req.name, "no Event: the guard does not know this object");
            return;
        };
        let mut note = decided.response.result.message.clone();
        match self.event_limiter.admit(kind, &req.name, Instant::now()) {
            Admit::Suppress => return,
            Admit::Write { suppressed: 0 } => {}
            Admit::Write { suppressed } => {
                note = format!("({suppressed} more refusals since the last Event) {note}");
            }
        }
        let regarding = events::reference(kind, &req.name, Some(&uid));
        tokio::spawn(async move {
            events.record(&regarding, true, reason, &note).await;
        });
    }
}

impl<V: ClusterView> Reviewer<V> {
    /// The uid of the MachineOSConfig or MachineOSBuild `name` in the cache, if it has it.
    fn known_uid(&self, kind: TargetKind, name: &str) -> Option<String> {
        let snapshot = self.view.objects();
        let meta = match kind {
            TargetKind::MachineOSConfig => &snapshot.machine_os_config(name)?.metadata,
            TargetKind::MachineOSBuild => &snapshot.machine_os_build(name)?.metadata,
        };
        meta.uid.clone()
    }
}

/// What one guarded request came to.
struct Decision {
    outcome: Outcome,
    blocking_nodes: usize,
    response: AdmissionResponse,
}

impl Decision {
    /// `--enforcement warn`: a refusal becomes an allow that carries the refusal's text as
    /// warnings (one per line, as the API server shows them), marked as not enforced.
    fn not_enforced(self, req: &Request) -> Self {
        if !matches!(self.outcome, Outcome::denied | Outcome::unverified) {
            return self;
        }
        let mut warnings = vec![
            "mosc-guard (--enforcement warn): this deletion would have been refused; it was admitted"
                .to_string(),
        ];
        warnings.extend(
            self.response
                .result
                .message
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| message::clip_to(format!("mosc-guard: {}", l.trim()), 256)),
        );
        warnings.extend(self.response.warnings.clone().unwrap_or_default());
        let mut response = admission::allow(req, warnings);
        // The refusal's words also go to the Event, as for an enforced refusal.
        response.result.message = self.response.result.message;
        Self {
            outcome: Outcome::would_deny,
            blocking_nodes: self.blocking_nodes,
            response,
        }
    }

    /// MCO's own request: admitted whatever the verdict. A refusal becomes an allow counted as
    /// `mco-would-deny`, its words kept for the Event that says the guard let MCO through.
    fn admitted_for_mco(self, req: &Request) -> Self {
        if !matches!(self.outcome, Outcome::denied | Outcome::unverified) {
            return self;
        }
        let mut response = admission::allow(
            req,
            vec![
                "mosc-guard: admitted as MCO's own request (--mco-user); it would have refused it"
                    .to_string(),
            ],
        );
        response.result.message = message::admitted_for_mco(&self.response.result.message);
        Self {
            outcome: Outcome::mco_would_deny,
            blocking_nodes: self.blocking_nodes,
            response,
        }
    }

    fn new(outcome: Outcome, response: AdmissionResponse) -> Self {
        Self {
            outcome,
            blocking_nodes: 0,
            response,
        }
    }

    fn blocking(mut self, verdict: &Verdict) -> Self {
        self.blocking_nodes = verdict.blocking.len();
        self
    }

    /// Adds `why` to a refusal (why it could not be deferred, or that it was a finalizer's
    /// removal).
    fn explain(mut self, why: &str) -> Self {
        if !self.response.allowed {
            self.response.result.message.push_str(why);
        }
        self
    }
}

fn respond(req: &Request, verdict: &Verdict) -> Decision {
    let note: Vec<String> = verdict
        .rules
        .note()
        .map(|n| message::clip_to(format!("mosc-guard: {n}"), 256))
        .into_iter()
        .collect();
    let decision = if !verdict.allowed {
        let mut denied = admission::deny(req, message::denial(verdict));
        if !note.is_empty() {
            denied.warnings = Some(note);
        }
        Decision::new(Outcome::denied, denied)
    } else if verdict.overridden() {
        let mut warnings = message::override_warnings(verdict);
        warnings.extend(note);
        Decision::new(Outcome::overridden, admission::allow(req, warnings))
    } else {
        Decision::new(Outcome::allowed, admission::allow(req, note))
    };
    decision.blocking(verdict)
}

/// Defer mode with the finalizer in place: allowed, with a warning while nodes still block.
fn deferred(req: &Request, verdict: &Verdict) -> Decision {
    let decision = if verdict.allowed {
        respond(req, verdict)
    } else {
        Decision::new(
            Outcome::deferred,
            admission::allow(req, vec![message::deferred(verdict)]),
        )
    };
    decision.blocking(verdict)
}

/// The override annotation on the object being deleted, for the audit log: the new object of
/// an UPDATE (a finalizer's release may set it in the same request), else the old one.
fn override_of(req: &Request) -> Option<&str> {
    req.object
        .as_ref()
        .or(req.old_object.as_ref())
        .and_then(|o| crate::core::model::override_reason(&o.metadata))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::core::message::Printable;
    use crate::core::model::MACHINE_OS_BUILDER_USER;
    use crate::core::release::ClusterRelease;
    use crate::core::snapshot::Snapshot;
    use crate::sources::view::StaticView;

    const IMAGE: &str =
        "quay.io/ocp/ocb@sha256:01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    /// A build whose image a node is still rolling to.
    fn build() -> serde_json::Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
            "metadata": {"name": "worker-1", "uid": "b-1",
                "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
            "status": {"digestedImagePushSpec": IMAGE}})
    }

    fn reviewer(users: Option<McoUsers>) -> Reviewer<StaticView> {
        let snapshot = Snapshot {
            machine_os_builds: vec![Arc::new(serde_json::from_value(build()).expect("build"))],
            nodes: vec![Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "n1", "annotations": {
                    "machineconfiguration.openshift.io/desiredImage": IMAGE}}}))
                .expect("node"),
            )],
            release: ClusterRelease::given("4.20.8"),
            ..Default::default()
        };
        let r = Reviewer::new(
            StaticView(Arc::new(snapshot)),
            PolicyMode::InFlight,
            Arc::new(Metrics::default()),
            Duration::from_secs(1),
        );
        match users {
            Some(u) => r.with_mco_users(u),
            None => r,
        }
    }

    fn delete_by(user: &str) -> Request {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "machineconfiguration.openshift.io", "version": "v1", "kind": "MachineOSBuild"},
                "resource": {"group": "machineconfiguration.openshift.io", "version": "v1", "resource": "machineosbuilds"},
                "name": "worker-1", "operation": "DELETE", "userInfo": {"username": user},
                "oldObject": build(), "dryRun": false}});
        admission::decode(&serde_json::to_vec(&body).expect("json")).expect("review")
    }

    #[tokio::test]
    async fn mcos_own_deletion_is_admitted_whatever_the_verdict_and_others_are_not() {
        let r = reviewer(None);
        let mco = r.review(&delete_by(MACHINE_OS_BUILDER_USER)).await;
        assert!(mco.allowed, "{mco:?}");
        assert!(
            mco.result
                .message
                .contains("mosc-guard would have refused it"),
            "the Event's note keeps the refusal: {}",
            mco.result.message
        );
        let admin = r.review(&delete_by("kube:admin")).await;
        assert!(!admin.allowed, "{admin:?}");
        let metrics = r.metrics.render(&[], &[], true);
        assert!(
            metrics.contains(
                "mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"mco-would-deny\"} 1"
            ) && metrics.contains(
                "mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"denied\"} 1"
            ),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn the_mco_users_are_configurable_and_can_be_none() {
        let other = "system:serviceaccount:mco:builder";
        let r = reviewer(Some(McoUsers::new([other.to_string(), " ".to_string()])));
        assert!(r.review(&delete_by(other)).await.allowed);
        assert!(!r.review(&delete_by(MACHINE_OS_BUILDER_USER)).await.allowed);
        let nobody = reviewer(Some(McoUsers::new([String::new()])));
        assert!(
            !nobody
                .review(&delete_by(MACHINE_OS_BUILDER_USER))
                .await
                .allowed
        );
        assert!(
            !nobody.review(&delete_by("")).await.allowed,
            "a blank user is nobody's"
        );
    }

    #[test]
    fn control_characters_are_escaped_for_the_log() {
        assert_eq!(Printable("worker").to_string(), "worker");
        assert_eq!(
            Printable("a\nb\x1b[31mc\r\u{7}").to_string(),
            "a\\nb\\u{1b}[31mc\\r\\u{7}"
        );
    }
}
