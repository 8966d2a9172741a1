//! AdmissionReview in and out: decoding, deciding what a request is about, and
//! building responses. Thin on purpose; decisions live in `policy`.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};

use crate::core::finalizer;
use crate::core::model::{GROUP, MachineOSBuild, MachineOSConfig};
use crate::core::policy::{Deletion, TargetKind};

const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
const REVIEW_KIND: &str = "AdmissionReview";

pub type Request = AdmissionRequest<DynamicObject>;

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
    /// `finalizer_release` marks an UPDATE that removes mosc-guard's finalizer from a
    /// MachineOSConfig being deleted: it completes the deletion, so it is decided as one.
    Delete {
        kind: TargetKind,
        name: String,
        subject: Result<Subject, String>,
        finalizer_release: bool,
    },
}

pub fn classify(req: &Request) -> Classified {
    if matches!(req.operation, Operation::Update) {
        return classify_update(req);
    }
    if !matches!(req.operation, Operation::Delete) || req.resource.group != GROUP {
        return Classified::Ignore;
    }
    let kind = match req.resource.resource.as_str() {
        "machineosconfigs" => TargetKind::MachineOSConfig,
        "machineosbuilds" => TargetKind::MachineOSBuild,
        _ => return Classified::Ignore,
    };
    if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return Classified::Ignore;
    }
    let subject = match &req.old_object {
        None => Err("the request carries no oldObject".to_string()),
        Some(obj) => decode_subject(kind, obj),
    };
    Classified::Delete {
        kind,
        name: req.name.clone(),
        subject,
        finalizer_release: false,
    }
}

/// An UPDATE matters only when it takes mosc-guard's finalizer off a MachineOSConfig that is
/// being deleted (the webhook configuration's matchConditions send only those; this checks
/// again). It is decided on the new object, so an override annotation set in the same
/// request counts.
fn classify_update(req: &Request) -> Classified {
    let relevant = req.resource.group == GROUP
        && req.resource.resource == "machineosconfigs"
        && req.sub_resource.as_deref().unwrap_or_default().is_empty();
    let (Some(old), Some(new)) = (&req.old_object, &req.object) else {
        return Classified::Ignore;
    };
    let releases = finalizer::is_terminating(&old.metadata)
        && finalizer::has(&old.metadata)
        && !finalizer::has(&new.metadata);
    if !relevant || !releases {
        return Classified::Ignore;
    }
    Classified::Delete {
        kind: TargetKind::MachineOSConfig,
        name: req.name.clone(),
        subject: decode_subject(TargetKind::MachineOSConfig, new),
        finalizer_release: true,
    }
}

fn decode_subject(kind: TargetKind, obj: &DynamicObject) -> Result<Subject, String> {
    let value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    let undecodable = |e: serde_json::Error| format!("oldObject does not decode: {e}");
    Ok(match kind {
        TargetKind::MachineOSConfig => Subject::Config(Box::new(
            serde_json::from_value(value).map_err(undecodable)?,
        )),
        TargetKind::MachineOSBuild => Subject::Build(Box::new(
            serde_json::from_value(value).map_err(undecodable)?,
        )),
    })
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
pub fn deny(req: &Request, message: String) -> AdmissionResponse {
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
mod tests {
    use super::*;
    use serde_json::json;

    fn review(operation: &str, resource: &str, old: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": GROUP, "version": "v1", "kind": "MachineOSConfig"},
                "resource": {"group": GROUP, "version": "v1", "resource": resource},
                "name": "worker",
                "operation": operation,
                "userInfo": {"username": "admin"},
                "object": null,
                "oldObject": old,
                "dryRun": false
            }
        }))
        .expect("serializes")
    }

    fn mosc() -> serde_json::Value {
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig", "metadata": {"name": "worker"}})
    }

    #[test]
    fn delete_of_a_config_is_classified_with_its_object() {
        let req = decode(&review("DELETE", "machineosconfigs", mosc())).expect("decodes");
        match classify(&req) {
            Classified::Delete {
                kind,
                name,
                subject: Ok(Subject::Config(c)),
                finalizer_release: false,
            } => {
                assert_eq!(
                    (kind, name.as_str()),
                    (TargetKind::MachineOSConfig, "worker")
                );
                assert_eq!(c.name(), "worker");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn other_operations_and_resources_are_ignored() {
        for (op, res) in [
            ("UPDATE", "machineosconfigs"),
            ("CREATE", "machineosbuilds"),
            ("DELETE", "machineconfigpools"),
        ] {
            let req = decode(&review(op, res, mosc())).expect("decodes");
            assert!(matches!(classify(&req), Classified::Ignore), "{op} {res}");
        }
    }

    /// An UPDATE review of MOSC `worker` from `old` metadata to `new` metadata.
    fn update(old: serde_json::Value, new: serde_json::Value) -> Request {
        let mut body: serde_json::Value =
            serde_json::from_slice(&review("UPDATE", "machineosconfigs", mosc())).expect("json");
        body["request"]["oldObject"]["metadata"] = old;
        body["request"]["object"] = body["request"]["oldObject"].clone();
        body["request"]["object"]["metadata"] = new;
        decode(&serde_json::to_vec(&body).expect("json")).expect("decodes")
    }

    #[test]
    fn removing_our_finalizer_from_a_terminating_config_is_decided_as_its_deletion() {
        let ours = finalizer::FINALIZER;
        let terminating = json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z", "finalizers": [ours, "x"]});
        let released = json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z", "finalizers": ["x"]});
        assert!(matches!(
            classify(&update(terminating.clone(), released.clone())),
            Classified::Delete {
                kind: TargetKind::MachineOSConfig,
                subject: Ok(Subject::Config(_)),
                finalizer_release: true,
                ..
            }
        ));
        // Keeping ours, or a live object, or an object that never had it: not our business.
        for (old, new) in [
            (terminating.clone(), terminating.clone()),
            (
                json!({"name": "worker", "finalizers": [ours]}),
                json!({"name": "worker"}),
            ),
            (
                released.clone(),
                json!({"name": "worker", "deletionTimestamp": "2026-11-30T00:00:00Z"}),
            ),
        ] {
            assert!(matches!(classify(&update(old, new)), Classified::Ignore));
        }
    }

    #[test]
    fn missing_old_object_is_reported_not_guessed() {
        let req = decode(&review(
            "DELETE",
            "machineosbuilds",
            serde_json::Value::Null,
        ))
        .expect("decodes");
        assert!(matches!(
            classify(&req),
            Classified::Delete {
                subject: Err(_),
                ..
            }
        ));
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert!(matches!(decode(b"{not json"), Err(DecodeError::Json(_))));
        // The parser quotes an unknown operation; its newline must not reach the log raw.
        let forged = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"DEL\nETE\u001b[31m","userInfo":{}}}"#;
        let e = decode(forged).expect_err("unknown operation").to_string();
        assert!(!e.contains(['\n', '\x1b']), "{e:?}");
        let wrong = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
        assert!(matches!(
            decode(&serde_json::to_vec(&wrong).expect("json")),
            Err(DecodeError::WrongKind { .. }) | Err(DecodeError::Json(_))
        ));
        let empty = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        assert!(matches!(
            decode(&serde_json::to_vec(&empty).expect("json")),
            Err(DecodeError::NoRequest)
        ));
    }

    #[test]
    fn denial_carries_uid_code_and_message() {
        let req = decode(&review("DELETE", "machineosconfigs", mosc())).expect("decodes");
        let out = serde_json::to_value(into_review(deny(&req, "no".into()))).expect("json");
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(
            out["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 403);
        assert_eq!(out["response"]["status"]["message"], "no");
    }
}
