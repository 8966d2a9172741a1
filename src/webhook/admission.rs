//! The validating webhook, in the order one request travels: decode the AdmissionReview,
//! classify what it asks (a guarded deletion, an UPDATE that completes one, or nothing to
//! decide), decide it through the [`Engine`], and hand the request and the decision to
//! [`answer`], which answers it (warn mode, MCO's requests, the audit line, the metrics, the
//! Event). Nothing comes back here; the mutating endpoint ([`super::mutation`]) shares the
//! decoding.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};

use crate::access::view::ClusterView;
use crate::core::model::{GROUP, MachineOSBuild, MachineOSConfig};
use crate::core::policy::{Deletion, TargetKind};
use crate::core::{finalizer, message};
use crate::decision::{DeletionMode, Engine};
use crate::webhook::answer::{
    self, Answers, Guarded, REVIEW_API_VERSION, REVIEW_KIND, Ruling, Unreadable,
};

pub type Request = AdmissionRequest<DynamicObject>;

/// The validating webhook's state: the engine it decides with, and what it does with a
/// verdict, which `serve` sets from its flags.
pub struct Admission<V> {
    engine: Arc<Engine<V>>,
    /// How MachineOSConfig deletions are answered.
    pub deletion_mode: DeletionMode,
    /// Stops adding the finalizer (draining before an uninstall); deferred deletions still
    /// complete.
    pub no_new_finalizers: bool,
    /// Users whose requests are MCO's own (`--mco-user`; by default the machine-os-builder):
    /// never refused (see [`McoUsers`]).
    pub mco_users: McoUsers,
    /// The enforcement of refusals, and the DeletionBlocked Events (none by default).
    pub answers: Answers,
}

impl<V: ClusterView> Admission<V> {
    pub fn new(engine: Engine<V>) -> Self {
        let answers = Answers::new(Arc::clone(&engine.metrics));
        Self {
            engine: Arc::new(engine),
            deletion_mode: DeletionMode::Deny,
            no_new_finalizers: false,
            mco_users: McoUsers::new([crate::core::model::MACHINE_OS_BUILDER_USER.to_string()]),
            answers,
        }
    }

    /// The engine it decides with, for the finalizer controller to share.
    pub fn engine(&self) -> &Arc<Engine<V>> {
        &self.engine
    }

    /// Whether the mutating webhook and the controller add the finalizer: defer mode only.
    pub fn adds_finalizers(&self) -> bool {
        self.deletion_mode == DeletionMode::Defer && !self.no_new_finalizers
    }

    /// Classifies `req`, decides it and answers it.
    pub async fn review(&self, req: &Request) -> AdmissionResponse {
        let started = Instant::now();
        let by_mco = self.mco_users.sent(req);
        let guarded = match classify(req) {
            Classified::Ignore => None,
            Classified::Delete {
                kind,
                name,
                subject,
                finalizer_removal,
            } => Some(Guarded {
                ruling: match subject {
                    Ok(subject) => self.decide(kind, subject, finalizer_removal).await,
                    Err(why) => Ruling::Unreadable(why),
                },
                kind,
                name,
            }),
        };
        self.answers
            .answer(req, guarded, by_mco, started, &*self.engine.view)
    }

    /// A guarded deletion decided: by the cache alone when defer mode's finalizer holds the
    /// object (the controller confirms with a fresh read before it lets go; the cache only words
    /// the warning), otherwise by the engine's check (cache, then a confirming read).
    async fn decide(&self, kind: TargetKind, subject: Subject, finalizer_removal: bool) -> Ruling {
        let defer = self.deletion_mode == DeletionMode::Defer;
        if let Subject::Config(c) = &subject
            && defer
            && finalizer::has(&c.metadata)
        {
            return Ruling::Deferred(self.engine.cached(subject.as_deletion()));
        }
        let why_refused = if finalizer_removal {
            Some(message::finalizer_removal())
        } else if defer && kind == TargetKind::MachineOSConfig {
            Some(message::not_deferrable())
        } else {
            None
        };
        Ruling::Checked {
            checked: self.engine.check(subject.as_deletion()).await,
            why_refused,
        }
    }
}

/// `POST /validate`: one AdmissionReview in, one out; a body that is not one gets a 400.
pub async fn validate<V: ClusterView>(
    State(admission): State<Arc<Admission<V>>>,
    body: Bytes,
) -> Response {
    match decode(&body) {
        Ok(req) => Json(answer::into_review(admission.review(&req).await)).into_response(),
        Err(e) => rejected(e),
    }
}

/// Why a request body is not something we can answer with a review.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The parser's message can quote the body (an unknown `operation`), so it is printed with
    /// control characters escaped: it is logged, and one request stays one log line.
    #[error("request body is not a valid AdmissionReview: {}", crate::core::message::Printable(&.0.to_string()))]
    Json(#[from] serde_json::Error),
    #[error("expected {REVIEW_KIND} in {REVIEW_API_VERSION}, got {kind:?} in {api_version:?}")]
    WrongKind { kind: String, api_version: String },
    #[error("AdmissionReview carries no request")]
    NoRequest,
}

/// Decodes an `admission.k8s.io/v1` AdmissionReview request.
pub fn decode(body: &[u8]) -> Result<Request, DecodeError> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)?;
    if review.types.kind != REVIEW_KIND || review.types.api_version != REVIEW_API_VERSION {
        return Err(DecodeError::WrongKind {
            kind: review.types.kind,
            api_version: review.types.api_version,
        });
    }
    review.try_into().map_err(|_| DecodeError::NoRequest)
}

/// The 400 that answers a body [`decode`] refused (logged).
pub fn rejected(e: DecodeError) -> Response {
    tracing::warn!(error = %e, "rejecting malformed admission request");
    (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
}

/// The object a guarded deletion is about, decoded from the request's oldObject.
#[derive(Clone, Debug)]
pub enum Subject {
    Config(Box<MachineOSConfig>),
    Build(Box<MachineOSBuild>),
}

impl Subject {
    pub fn as_deletion(&self) -> Deletion<'_> {
        match self {
            Subject::Config(c) => Deletion::MachineOSConfig(c),
            Subject::Build(b) => Deletion::MachineOSBuild(b),
        }
    }
}

/// What a request asks the guard to decide.
#[derive(Debug)]
pub enum Classified {
    /// Not a deletion of a guarded kind: allowed untouched.
    Ignore,
    /// A guarded deletion; `subject` is `Err` when oldObject is absent or undecodable.
    /// `finalizer_removal` marks an UPDATE that removes mosc-guard's finalizer from a
    /// MachineOSConfig being deleted: it completes the deletion, so it is decided as one.
    Delete {
        kind: TargetKind,
        name: String,
        subject: Result<Subject, Unreadable>,
        finalizer_removal: bool,
    },
}

pub fn classify(req: &Request) -> Classified {
    if matches!(req.operation, Operation::Update) {
        return classify_update(req);
    }
    let Some(kind) = guarded_kind(req).filter(|_| matches!(req.operation, Operation::Delete))
    else {
        return Classified::Ignore;
    };
    let subject = match &req.old_object {
        None => Err(Unreadable::NoOldObject),
        Some(obj) => decode_subject(kind, obj),
    };
    Classified::Delete {
        kind,
        name: req.name.clone(),
        subject,
        finalizer_removal: false,
    }
}

/// An UPDATE matters only when it takes mosc-guard's finalizer off a MachineOSConfig that is
/// being deleted (the webhook configuration's matchConditions send only those; this checks
/// again). It is decided on the new object, so an override annotation set in the same
/// request counts.
fn classify_update(req: &Request) -> Classified {
    let relevant = guarded_kind(req) == Some(TargetKind::MachineOSConfig);
    let (Some(old), Some(new)) = (&req.old_object, &req.object) else {
        return Classified::Ignore;
    };
    let removes_ours = finalizer::is_terminating(&old.metadata)
        && finalizer::has(&old.metadata)
        && !finalizer::has(&new.metadata);
    if !relevant || !removes_ours {
        return Classified::Ignore;
    }
    Classified::Delete {
        kind: TargetKind::MachineOSConfig,
        name: req.name.clone(),
        subject: decode_subject(TargetKind::MachineOSConfig, new),
        finalizer_removal: true,
    }
}

/// The guarded kind `req` is about: a MachineOSConfig or MachineOSBuild itself (not a
/// subresource), else `None`.
pub(super) fn guarded_kind(req: &Request) -> Option<TargetKind> {
    let no_subresource = req.sub_resource.as_deref().unwrap_or_default().is_empty();
    if req.resource.group != GROUP || !no_subresource {
        return None;
    }
    match req.resource.resource.as_str() {
        "machineosconfigs" => Some(TargetKind::MachineOSConfig),
        "machineosbuilds" => Some(TargetKind::MachineOSBuild),
        _ => None,
    }
}

fn decode_subject(kind: TargetKind, obj: &DynamicObject) -> Result<Subject, Unreadable> {
    let value = serde_json::to_value(obj).map_err(Unreadable::Encode)?;
    let decoded = match kind {
        TargetKind::MachineOSConfig => serde_json::from_value(value).map(Subject::Config),
        TargetKind::MachineOSBuild => serde_json::from_value(value).map(Subject::Build),
    };
    decoded.map_err(Unreadable::Decode)
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

    /// Whether `req` was sent by one of them.
    pub fn sent(&self, req: &Request) -> bool {
        req.user_info
            .username
            .as_deref()
            .is_some_and(|u| self.0.iter().any(|m| m == u))
    }
}
