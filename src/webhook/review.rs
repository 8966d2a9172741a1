//! Answers one admission request: classify it, decide through the [`Engine`] (from the cache,
//! confirmed by a fresh read), and answer as the deletion mode, the enforcement and the
//! requester say: in defer mode a MachineOSConfig that carries the finalizer is let through
//! with a warning (the finalizer holds it), under `--enforcement warn` a refusal is admitted
//! with its text as warnings, and MCO's own requests are admitted whatever the verdict.

use std::sync::Arc;
use std::time::Instant;

use kube::core::admission::AdmissionResponse;

use crate::core::finalizer;
use crate::core::message;
use crate::core::message::Printable;
use crate::core::outcome::Outcome;
use crate::core::policy::TargetKind;
use crate::decision::{Checked, DeletionMode, Enforcement, Engine};
use crate::sources::view::ClusterView;
use crate::telemetry::events::{self, Events};
use crate::webhook::admission::{self, Classified, Request, Subject};
use crate::webhook::answer::Answer;
use crate::webhook::event_limiter::{Admit, EventLimiter};
use crate::webhook::mco_users::McoUsers;

pub struct Reviewer<V> {
    engine: Arc<Engine<V>>,
    deletion_mode: DeletionMode,
    enforcement: Enforcement,
    no_new_finalizers: bool,
    events: Option<Events>,
    /// Per-object rate limit of DeletionBlocked Events.
    event_limiter: EventLimiter,
    /// Users whose requests are MCO's own (`--mco-user`): never refused (see [`McoUsers`]).
    mco_users: McoUsers,
}

impl<V: ClusterView> Reviewer<V> {
    pub fn new(engine: Engine<V>) -> Self {
        Self {
            engine: Arc::new(engine),
            deletion_mode: DeletionMode::Deny,
            enforcement: Enforcement::Deny,
            no_new_finalizers: false,
            events: None,
            event_limiter: EventLimiter::default(),
            mco_users: McoUsers::machine_os_builder(),
        }
    }

    /// The engine it decides with, for the finalizer controller to share.
    pub fn engine(&self) -> &Arc<Engine<V>> {
        &self.engine
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

    /// Records a DeletionBlocked Event for every refused deletion that is not a dry run.
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = Some(events);
        self
    }

    pub async fn review(&self, req: &Request) -> AdmissionResponse {
        let started = Instant::now();
        let (resource, answer) = match admission::classify(req) {
            Classified::Ignore => ("other", Answer::allow(Outcome::Ignored, vec![])),
            Classified::Delete {
                kind,
                name,
                subject,
                finalizer_release,
            } => {
                let decodable = subject.is_ok();
                let answer = self.deletion(kind, &name, subject, finalizer_release).await;
                let answer = if self.mco_users.sent(req) {
                    answer.admitted_for_mco()
                } else {
                    match self.enforcement {
                        Enforcement::Deny => answer,
                        Enforcement::Warn => answer.not_enforced(),
                    }
                };
                if decodable {
                    self.record_refusal(req, kind, &answer);
                }
                (kind.metric_label(), answer)
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
            result = %answer.outcome.label(),
            blocking_nodes = answer.blocking_nodes,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "admission decision"
        );
        self.engine
            .metrics
            .decision(resource, answer.outcome, elapsed.as_secs_f64());
        answer.encode(req)
    }

    async fn deletion(
        &self,
        kind: TargetKind,
        name: &str,
        subject: Result<Subject, String>,
        finalizer_release: bool,
    ) -> Answer {
        let subject = match subject {
            Ok(s) => s,
            Err(why) => {
                return Answer::deny(Outcome::Unverified, message::unverified(kind, name, &why));
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
            return Answer::deferred(&self.engine.cached(subject.as_deletion()));
        }
        let answer = match self.engine.check(subject.as_deletion()).await {
            Checked::Decided(verdict) | Checked::Confirmed(verdict) => {
                Answer::from_verdict(&verdict)
            }
            Checked::Unverified { cached, why } => {
                if let Some(reason) = cached.override_reason.as_deref() {
                    tracing::warn!(name = %Printable(name), %why, "could not confirm an allow; allowed by override");
                    let warning =
                        message::unverified_override(kind, name, &why.to_string(), reason);
                    Answer::allow(Outcome::Overridden, vec![warning])
                } else {
                    tracing::warn!(name = %Printable(name), reason = %why, "could not confirm an allow; denying");
                    Answer::deny(
                        Outcome::Unverified,
                        message::unverified(kind, name, &why.to_string()),
                    )
                }
            }
        };
        if finalizer_release {
            return answer.explain(&message::finalizer_release());
        }
        if self.deletion_mode == DeletionMode::Defer && kind == TargetKind::MachineOSConfig {
            return answer.explain(&message::not_deferrable());
        }
        answer
    }

    /// A DeletionBlocked Event for a refused deletion (DeletionWouldBeBlocked under
    /// `--enforcement warn`), recorded in the background so the answer to the API server does
    /// not wait for it. Dry runs leave no trace.
    fn record_refusal(&self, req: &Request, kind: TargetKind, answer: &Answer) {
        let reason = match answer.outcome {
            Outcome::Denied | Outcome::Unverified => events::REASON_BLOCKED,
            Outcome::WouldDeny => events::REASON_WOULD_BLOCK,
            Outcome::McoWouldDeny => events::REASON_MCO_ADMITTED,
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
        let mut note = answer.message.clone();
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
        let snapshot = self.engine.view.objects();
        let meta = match kind {
            TargetKind::MachineOSConfig => &snapshot.machine_os_config(name)?.metadata,
            TargetKind::MachineOSBuild => &snapshot.machine_os_build(name)?.metadata,
        };
        meta.uid.clone()
    }
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
    use crate::core::policy::PolicyMode;
    use crate::core::release::ClusterRelease;
    use crate::core::snapshot::Snapshot;
    use crate::sources::view::StaticView;
    use crate::telemetry::metrics::Metrics;

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
        let r = Reviewer::new(Engine::new(
            StaticView(Arc::new(snapshot)),
            PolicyMode::InFlight,
            Arc::new(Metrics::default()),
            Duration::from_secs(1),
        ));
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
        let metrics = r.engine().metrics.render(&[], &[], true);
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
