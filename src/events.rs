//! Kubernetes Events about guarded objects, so `oc describe`, `oc get events` and event-based
//! alerting see what the guard did: a refused deletion (DeletionBlocked), a deletion held by
//! the finalizer (DeletionDeferred) and its release (DeletionReleased).
//!
//! Events are best effort: a failure to record one is logged and never changes a decision.
//! MachineOSConfigs and MachineOSBuilds are cluster-scoped, so their Events live in the
//! `default` namespace (events.k8s.io/v1), which the RBAC in `manifests/base` grants.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::message::clip_to;
use crate::model::{GROUP, VERSION};
use crate::policy::TargetKind;

/// The `reportingController` of every Event mosc-guard records.
pub const CONTROLLER: &str = "mosc-guard.dev/mosc-guard";
/// The API server rejects Event notes longer than 1 KiB.
const MAX_NOTE_BYTES: usize = 1024;

pub const REASON_BLOCKED: &str = "DeletionBlocked";
pub const REASON_DEFERRED: &str = "DeletionDeferred";
pub const REASON_RELEASED: &str = "DeletionReleased";

/// Records Events as this replica (`instance`, the pod name).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: kube::Client, instance: &str) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER.to_string(),
            instance: Some(instance.to_string()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Records one Event about `regarding`; failures are logged, not returned.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(clip_to(note.to_string(), MAX_NOTE_BYTES)),
            action: "Delete".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(
                reason,
                object = regarding.name.as_deref().unwrap_or_default(),
                error = %e,
                "could not record an Event"
            );
        }
    }
}

/// A reference to a MachineOSConfig or MachineOSBuild (cluster-scoped).
pub fn reference(kind: TargetKind, name: &str, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some(format!("{GROUP}/{VERSION}")),
        kind: Some(kind.kind().to_string()),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_clipped_on_a_character_boundary() {
        assert_eq!(clip_to("short".into(), 10), "short");
        let long = "é".repeat(600); // 1200 bytes
        let clipped = clip_to(long, MAX_NOTE_BYTES);
        assert!(clipped.len() <= MAX_NOTE_BYTES);
        assert!(clipped.ends_with("..."));
    }

    #[test]
    fn references_name_the_kind_and_group() {
        let r = reference(TargetKind::MachineOSBuild, "worker-abc", Some("u-1"));
        assert_eq!(r.kind.as_deref(), Some("MachineOSBuild"));
        assert_eq!(
            r.api_version.as_deref(),
            Some("machineconfiguration.openshift.io/v1")
        );
        assert_eq!(r.uid.as_deref(), Some("u-1"));
        assert_eq!(r.namespace, None);
    }
}
