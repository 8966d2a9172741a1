//! The finalizer controller of defer mode (run by the Lease holder only).
//!
//! For every MachineOSConfig it asks [`finalizer::plan`] what to do: add the finalizer to one
//! that lacks it (objects created before mosc-guard, or while the mutating webhook was down),
//! and for one being deleted, release the finalizer once [`Reviewer::check`] (the webhook's own
//! decision path: cache, then a fresh read) says no node still needs its images, or the
//! override annotation is set. Until then it re-checks with backoff and records a
//! DeletionDeferred Event whenever the set of blocking nodes changes.
//!
//! Every write is a JSON patch that tests the resourceVersion it was planned from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::events::{self, Events};
use crate::finalizer::{self, ReleaseReason, Step};
use crate::message;
use crate::metrics::Metrics;
use crate::model::MachineOSConfig;
use crate::policy::{Deletion, TargetKind};
use crate::review::{Checked, Reviewer};
use crate::view::ClusterView;

/// Field manager of the controller's patches.
pub const FIELD_MANAGER: &str = "mosc-guard";
/// Every MachineOSConfig is looked at again this often (adoption of any that lack the finalizer).
const RESYNC: Duration = Duration::from_secs(300);
/// Backoff between checks of a deferred deletion: 1, 2, 4, 8 s, then every 10 s.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// Bound of the confirming read here: no webhook deadline to meet, so longer than a request's.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound of one patch: a half-open connection must not hold a release for minutes.
const PATCH_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("patching machineosconfig {name}: {source}")]
    Patch {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("patching machineosconfig {name}: no answer within {PATCH_TIMEOUT:?}")]
    PatchTimeout { name: String },
}

impl Error {
    /// A write based on a stale read (resourceVersion or finalizer index changed): expected
    /// now and then, retried at once.
    fn is_conflict(&self) -> bool {
        matches!(self, Error::Patch { source: kube::Error::Api(s), .. } if s.code == 409 || s.code == 422)
    }
}

/// What the controller remembers per deferred deletion (by uid): how often it waited, and
/// the blocking nodes it last reported in an Event.
#[derive(Default)]
struct Memo {
    attempts: u32,
    reported: Option<Vec<String>>,
}

struct Context<V> {
    api: Api<MachineOSConfig>,
    reviewer: Arc<Reviewer<V>>,
    events: Events,
    metrics: Arc<Metrics>,
    add_finalizers: bool,
    store: Store<MachineOSConfig>,
    memos: Mutex<HashMap<String, Memo>>,
}

impl<V> Context<V> {
    /// A Normal Event about `mosc`.
    async fn record(&self, mosc: &MachineOSConfig, reason: &str, note: &str) {
        let regarding = events::reference(
            TargetKind::MachineOSConfig,
            mosc.name(),
            mosc.metadata.uid.as_deref(),
        );
        self.events.record(&regarding, false, reason, note).await;
    }

    /// Refreshes the gauge of deferred deletions, leaving out `released` (the store still
    /// holds an object until its deletion is observed).
    fn count_deferred(&self, released: Option<&str>) {
        let n = self
            .store
            .state()
            .iter()
            .filter(|m| finalizer::is_terminating(&m.metadata) && finalizer::has(&m.metadata))
            .filter(|m| released.is_none() || m.metadata.uid.as_deref() != released)
            .count();
        self.metrics.set_deferred(n);
    }

    fn memo<T>(&self, uid: &str, f: impl FnOnce(&mut Memo) -> T) -> T {
        let mut memos = self.memos.lock().unwrap_or_else(|p| p.into_inner());
        f(memos.entry(uid.to_string()).or_default())
    }

    fn forget(&self, uid: &str) {
        self.memos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
    }
}

/// Runs the controller until `stop` is cancelled.
pub async fn run<V: ClusterView>(
    client: kube::Client,
    reviewer: Arc<Reviewer<V>>,
    events: Events,
    metrics: Arc<Metrics>,
    add_finalizers: bool,
    stop: CancellationToken,
) {
    let api: Api<MachineOSConfig> = Api::all(client);
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .graceful_shutdown_on(async move { stop.cancelled().await });
    let context = Arc::new(Context {
        api,
        reviewer,
        events,
        metrics: Arc::clone(&metrics),
        add_finalizers,
        store: controller.store(),
        memos: Mutex::default(),
    });
    controller
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                // Already logged by `error_policy`.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => tracing::warn!(error = %e, "finalizer controller"),
            }
        })
        .await;
    // Only the leader reports deferred deletions.
    metrics.set_deferred(0);
    tracing::info!("finalizer controller stopped");
}

async fn reconcile<V: ClusterView>(
    mosc: Arc<MachineOSConfig>,
    ctx: Arc<Context<V>>,
) -> Result<Action, Error> {
    let meta = &mosc.metadata;
    let name = mosc.name();
    let uid = meta.uid.clone().unwrap_or_default();
    ctx.count_deferred(None);
    let checked = if finalizer::is_terminating(meta) && finalizer::has(meta) {
        let target = Deletion::MachineOSConfig(&mosc);
        Some(ctx.reviewer.check_within(target, CONFIRM_TIMEOUT).await)
    } else {
        None
    };
    let verdict = match &checked {
        Some(Checked::Decided(v) | Checked::Confirmed(v)) => Some(v),
        Some(Checked::Unverified { why, .. }) => {
            tracing::warn!(%name, %why, "cannot verify a deferred deletion; keeping the finalizer");
            None
        }
        None => None,
    };
    match finalizer::plan(meta, verdict, ctx.add_finalizers) {
        Step::Idle => {
            ctx.forget(&uid);
            Ok(Action::requeue(RESYNC))
        }
        Step::Protect => {
            if let Some(patch) = finalizer::add_patch(meta, meta.resource_version.as_deref()) {
                patch_mosc(&ctx.api, name, patch).await?;
                tracing::info!(%name, finalizer = finalizer::FINALIZER, "added the finalizer");
            }
            Ok(Action::requeue(RESYNC))
        }
        Step::Release(reason) => {
            let Some(patch) = finalizer::remove_patch(meta, meta.resource_version.as_deref())
            else {
                return Ok(Action::await_change());
            };
            patch_mosc(&ctx.api, name, patch).await?;
            ctx.count_deferred(Some(&uid));
            let waited = meta
                .deletion_timestamp
                .as_ref()
                .map(|t| {
                    (k8s_openapi::jiff::Timestamp::now() - t.0)
                        .get_seconds()
                        .max(0)
                })
                .unwrap_or(0);
            ctx.metrics.released(reason, waited as f64);
            ctx.forget(&uid);
            tracing::info!(%name, ?reason, waited_seconds = waited, "released the finalizer");
            let overridden_by = verdict
                .filter(|_| reason == ReleaseReason::overridden)
                .and_then(|v| v.override_reason.as_deref());
            ctx.record(
                &mosc,
                events::REASON_RELEASED,
                &message::released_note(overridden_by),
            )
            .await;
            Ok(Action::await_change())
        }
        Step::Wait { blocking_nodes } => {
            let (attempts, changed) = ctx.memo(&uid, |m| {
                m.attempts = m.attempts.saturating_add(1);
                let changed =
                    !blocking_nodes.is_empty() && m.reported.as_ref() != Some(&blocking_nodes);
                if changed {
                    m.reported = Some(blocking_nodes.clone());
                }
                (m.attempts, changed)
            });
            if let (true, Some(v)) = (changed, verdict) {
                tracing::info!(%name, blocking = blocking_nodes.len(), "deletion deferred");
                ctx.record(&mosc, events::REASON_DEFERRED, &message::deferred_note(v))
                    .await;
            }
            Ok(Action::requeue(backoff(attempts)))
        }
    }
}

/// A conflict is retried at once; anything else with the same backoff as a deferral, so a
/// persistent failure (RBAC, another webhook refusing the update) does not loop every second.
fn error_policy<V>(mosc: Arc<MachineOSConfig>, error: &Error, ctx: Arc<Context<V>>) -> Action {
    if error.is_conflict() {
        tracing::debug!(name = mosc.name(), %error, "stale read; retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    let uid = mosc.metadata.uid.clone().unwrap_or_default();
    let attempts = ctx.memo(&uid, |m| {
        m.attempts = m.attempts.saturating_add(1);
        m.attempts
    });
    tracing::warn!(name = mosc.name(), %error, "will retry");
    Action::requeue(backoff(attempts))
}

async fn patch_mosc(
    api: &Api<MachineOSConfig>,
    name: &str,
    patch: json_patch::Patch,
) -> Result<(), Error> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    let patch = Patch::Json::<()>(patch);
    let call = api.patch(name, &params, &patch);
    match tokio::time::timeout(PATCH_TIMEOUT, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(source)) => Err(Error::Patch {
            name: name.to_string(),
            source,
        }),
        Err(_) => Err(Error::PatchTimeout {
            name: name.to_string(),
        }),
    }
}

/// 1, 2, 4, 8 s, then [`MAX_RETRY`].
fn backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(8);
    (FIRST_RETRY * 2u32.pow(exp)).min(MAX_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_then_stays_at_the_cap() {
        let seconds: Vec<u64> = (1..=7).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(backoff(u32::MAX), MAX_RETRY);
    }
}
