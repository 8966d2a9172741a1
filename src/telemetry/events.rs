//! Kubernetes Events about guarded objects, for `oc describe` and event-based alerting:
//! DeletionBlocked, DeletionDeferred, DeletionReleased, and the Event `recover --apply` records on
//! a node before it cancels its target ([`node_event`]). Best effort: a failure is logged and never
//! changes a decision. Written directly (events.k8s.io/v1; why not kube-runtime's recorder:
//! docs/design.md, "Crates tried"); cluster-scoped objects' Events live in `default`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::core::message::clip_to;
use crate::core::model::{GROUP, VERSION};
use crate::core::policy::TargetKind;
use crate::telemetry::event_limiter::{Admit, EventLimiter};

/// The `reportingController` of every Event mosc-guard records.
pub const CONTROLLER: &str = "mosc-guard.dev/mosc-guard";
/// The API server rejects Event notes longer than 1 KiB.
const MAX_NOTE_BYTES: usize = 1024;
/// An identical Event within this window is counted as a series instead of created again.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Bound for one API call: an Event is never worth a stuck caller.
const API_TIMEOUT: Duration = Duration::from_secs(10);
/// Where Events about cluster-scoped objects live.
const NAMESPACE: &str = "default";

pub const REASON_BLOCKED: &str = "DeletionBlocked";
/// `--enforcement warn`: a deletion that would have been refused was admitted.
pub const REASON_WOULD_BLOCK: &str = "DeletionWouldBeBlocked";
/// MCO's own deletion (`--mco-user`) was admitted although the guard would have refused it.
pub const REASON_MCO_ADMITTED: &str = "DeletionByMCOAdmitted";
pub const REASON_DEFERRED: &str = "DeletionDeferred";
pub const REASON_RELEASED: &str = "DeletionReleased";
/// `recover --apply` is about to cancel a node's target that no build can serve.
pub const REASON_RECOVERY: &str = "LostImageTargetCancelled";

/// What makes two Events the same: unlike kube-runtime's recorder, the note is part of it,
/// so a DeletionDeferred naming other nodes is a new Event, not a recount of the old one.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    reason: String,
    regarding: (Option<String>, Option<String>, Option<String>),
    note: String,
}

/// An Event already recorded: its name, count and when it was last seen.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    count: i32,
    last: Instant,
}

/// A refused deletion's Event, about a MachineOSConfig or MachineOSBuild the guard knows.
#[derive(Debug)]
pub struct Refusal {
    pub kind: TargetKind,
    pub name: String,
    pub uid: String,
    /// [`REASON_BLOCKED`], [`REASON_WOULD_BLOCK`] or [`REASON_MCO_ADMITTED`].
    pub reason: &'static str,
    /// The refusal's words.
    pub note: String,
}

/// Records Events as this replica (`instance`, the pod name).
#[derive(Clone)]
pub struct Events {
    api: Api<Event>,
    instance: String,
    seen: Arc<Mutex<HashMap<Key, Seen>>>,
    /// Per-object rate limit of refusals' Events ([`Events::refusal`]).
    limiter: Arc<EventLimiter>,
}

impl Events {
    pub fn new(client: kube::Client, instance: &str) -> Self {
        Self {
            api: Api::namespaced(client, NAMESPACE),
            instance: instance.to_string(),
            seen: Arc::default(),
            limiter: Arc::default(),
        }
    }

    /// A refusal's Warning Event, recorded in the background so the answer to the API server
    /// does not wait for it. Per object, a burst and then one per interval (the refusals held
    /// back are counted in the next Event's note), so callers of `/validate` cannot make the
    /// guard write Events at any rate.
    pub fn refusal(&self, refusal: Refusal) {
        let note = match self
            .limiter
            .admit(refusal.kind, &refusal.name, Instant::now())
        {
            Admit::Suppress => return,
            Admit::Write { suppressed: 0 } => refusal.note,
            Admit::Write { suppressed } => {
                format!(
                    "({suppressed} more refusals since the last Event) {}",
                    refusal.note
                )
            }
        };
        let regarding = reference(refusal.kind, &refusal.name, Some(&refusal.uid));
        let events = self.clone();
        tokio::spawn(async move {
            events.record(&regarding, true, refusal.reason, &note).await;
        });
    }

    /// Records one Event about `regarding` (an identical one within a few minutes only counts
    /// up its series); failures are logged, not returned.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
    ) {
        let note = clip_to(note.to_string(), MAX_NOTE_BYTES);
        let key = Key {
            reason: reason.to_string(),
            regarding: (
                regarding.kind.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ),
            note: note.clone(),
        };
        let previous = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.retain(|_, s| s.last.elapsed() < SERIES_WINDOW);
            seen.get(&key).cloned()
        };
        let now = MicroTime(Timestamp::now());
        let result = match &previous {
            Some(prev) => {
                let count = prev.count.saturating_add(1);
                let series = EventSeries {
                    count,
                    last_observed_time: now,
                };
                let patch = json!({"series": series});
                tokio::time::timeout(
                    API_TIMEOUT,
                    self.api
                        .patch(&prev.name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await
                .map(|r| r.map(|_| (prev.name.clone(), count)))
            }
            None => {
                let event = self.event(regarding, warning, reason, note, now);
                tokio::time::timeout(API_TIMEOUT, self.api.create(&PostParams::default(), &event))
                    .await
                    .map(|r| r.map(|e| (e.metadata.name.unwrap_or_default(), 1)))
            }
        };
        let object = regarding.name.as_deref().unwrap_or_default();
        match result {
            Ok(Ok((name, count))) => {
                let last = Instant::now();
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                seen.insert(key, Seen { name, count, last });
            }
            Ok(Err(e)) => tracing::warn!(reason, object, error = %e, "could not record an Event"),
            Err(_) => tracing::warn!(reason, object, "recording an Event timed out"),
        }
    }

    fn event(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
        now: MicroTime,
    ) -> Event {
        let object = regarding.name.as_deref().unwrap_or("mosc-guard");
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object, now.0.as_nanosecond())),
                namespace: Some(NAMESPACE.to_string()),
                ..Default::default()
            },
            event_time: Some(now),
            action: Some("Delete".to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(CONTROLLER.to_string()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if warning { "Warning" } else { "Normal" }.to_string()),
            ..Default::default()
        }
    }
}

/// Records one Normal Event about node `name` (`uid` when known) as `recover --apply` runs it,
/// with the admin's own credentials: a core/v1 Event whose `involvedObject` is the Node, in the
/// `default` namespace where Node Events live, so `oc describe node` lists it. Unlike the
/// guard's Events its failure is returned: the caller says so.
pub async fn node_event(
    client: kube::Client,
    name: &str,
    uid: Option<&str>,
    reason: &str,
    note: &str,
) -> Result<String, kube::Error> {
    let now = Timestamp::now();
    let event = CoreEvent {
        metadata: ObjectMeta {
            name: Some(event_name(name, now.as_nanosecond())),
            namespace: Some(NAMESPACE.to_string()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(name.to_string()),
            uid: uid.map(str::to_string),
            ..Default::default()
        },
        reason: Some(reason.to_string()),
        message: Some(clip_to(note.to_string(), MAX_NOTE_BYTES)),
        type_: Some("Normal".to_string()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        source: Some(EventSource {
            component: Some("mosc-guard-recover".to_string()),
            host: None,
        }),
        ..Default::default()
    };
    let api: Api<CoreEvent> = Api::namespaced(client, NAMESPACE);
    match tokio::time::timeout(API_TIMEOUT, api.create(&PostParams::default(), &event)).await {
        Ok(created) => Ok(created?.metadata.name.unwrap_or_default()),
        Err(_) => Err(kube::Error::Service(
            format!("no answer within {API_TIMEOUT:?}").into(),
        )),
    }
}

/// Longest object name (a DNS subdomain), and so longest Event name.
const MAX_NAME: usize = 253;

/// `{object}.{nanoseconds in hex}`, as kubectl and client-go name Events, kept a valid DNS
/// subdomain of at most 253 characters for any valid object name: a long name is cut so the
/// suffix fits, and a cut that leaves `-` or `.` at the end loses those too.
fn event_name(object: &str, nanos: i128) -> String {
    let suffix = format!(".{nanos:x}");
    let room = MAX_NAME - suffix.len();
    let mut prefix: String = object
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.')
        .take(room)
        .collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    if prefix.is_empty() {
        prefix.push_str("mosc-guard");
    }
    prefix + &suffix
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
mod tests;
