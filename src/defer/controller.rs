//! The finalizer controller, run by the Lease holder in both modes: in defer mode it adds and
//! removes the finalizer; in deny mode it only removes finalizers left from defer mode, so
//! switching modes strands no MachineOSConfig. [`finalizer::plan`] says what to do with each; a
//! finalizer goes once [`Engine::check`] (the webhook's decision path) allows the deletion; until
//! then it re-checks with backoff, with a DeletionDeferred Event when the blocking nodes change.
//! Every write is a JSON patch that tests the resourceVersion it was planned from.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::access::view::ClusterView;
use crate::core::finalizer::{self, Failure, RemovalReason, Step};
use crate::core::message;
use crate::core::model::MachineOSConfig;
use crate::core::policy::{Deletion, TargetKind};
use crate::decision::{Checked, Engine};
use crate::defer::deferrals::{Deferrals, Janitor};
use crate::telemetry::events::{self, Events};
use crate::telemetry::metrics::Metrics;

/// Field manager of the controller's patches.
const FIELD_MANAGER: &str = "mosc-guard";
/// Every MachineOSConfig is looked at again this often (adoption of any that lack the finalizer).
const RESYNC: Duration = Duration::from_secs(300);
/// Backoff between checks of a deferred deletion: 1, 2, 4, 8 s, then every 10 s.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// Bound of the confirming read here: no webhook deadline to meet, so longer than a request's.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound of one patch: a half-open connection must not hold a removal for minutes.
const PATCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Retry after a conflict (the watch brings the newer object meanwhile).
const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// Reason of the Warning Event recorded when a patch fails for another reason than a conflict.
pub const REASON_PATCH_FAILED: &str = "FinalizerUpdateFailed";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "patching machineosconfig {name}: {}",
        crate::access::live::chain(source)
    )]
    Patch {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The patch's test failed because the object changed since it was read (the API server
    /// answers a failed JSON-patch test with 422, like a genuinely invalid request; a read of
    /// the object tells the two apart).
    #[error("patching machineosconfig {name}: it changed since it was read")]
    Stale { name: String },
    #[error("patching machineosconfig {name}: no answer within {PATCH_TIMEOUT:?}")]
    PatchTimeout { name: String },
}

impl Error {
    pub fn failure(&self) -> Failure {
        match self {
            Error::Stale { .. } => Failure::Conflict,
            Error::PatchTimeout { .. } => Failure::Timeout,
            Error::Patch {
                source: kube::Error::Api(s),
                ..
            } => match s.code {
                409 => Failure::Conflict,
                422 => Failure::Invalid,
                401 | 403 => Failure::Forbidden,
                _ => Failure::Other,
            },
            Error::Patch { .. } => Failure::Other,
        }
    }
}

/// When to try again after `failure`, the `attempts`-th failure or deferral of this object:
/// only a conflict (a stale read) at once; everything else with the deferral backoff, so a
/// persistent failure (RBAC, an invalid update, another webhook refusing it) does not loop.
fn retry_after(failure: Failure, attempts: u32) -> Duration {
    match failure {
        Failure::Conflict => CONFLICT_RETRY,
        _ => backoff(attempts),
    }
}

struct Context<V> {
    api: Api<MachineOSConfig>,
    engine: Arc<Engine<V>>,
    events: Events,
    metrics: Arc<Metrics>,
    add_finalizers: bool,
    store: Store<MachineOSConfig>,
    deferrals: Arc<Deferrals>,
}

impl<V> Context<V> {
    /// A Normal Event about `mosc`.
    async fn record(&self, mosc: &MachineOSConfig, reason: &str, note: &str) {
        self.events
            .record(&regarding(mosc), false, reason, note)
            .await;
    }

    /// Refreshes the gauges of deferred deletions (how many, and the oldest one's
    /// deletionTimestamp), leaving out `completed` (the store still holds an object until its
    /// deletion is observed).
    fn count_deferred(&self, completed: Option<&str>) {
        let state = self.store.state();
        let held: Vec<_> = state
            .iter()
            .filter(|m| finalizer::is_terminating(&m.metadata) && finalizer::has(&m.metadata))
            .filter(|m| completed.is_none() || m.metadata.uid.as_deref() != completed)
            .collect();
        let oldest = held
            .iter()
            .filter_map(|m| m.metadata.deletion_timestamp.as_ref())
            .map(|t| t.0.as_second())
            .min();
        self.metrics.set_deferred(held.len(), oldest);
    }
}

/// Runs the controller until `stop` is cancelled.
pub async fn run<V: ClusterView>(
    client: kube::Client,
    engine: Arc<Engine<V>>,
    events: Events,
    metrics: Arc<Metrics>,
    add_finalizers: bool,
    stop: CancellationToken,
) {
    if !wait_for_caches(&*engine.view, &stop).await {
        tracing::info!("finalizer controller stopped before the caches synced");
        return;
    }
    let api: Api<MachineOSConfig> = Api::all(client);
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .graceful_shutdown_on(async move { stop.cancelled().await });
    // The controller is never called for an object that is gone, so a metadata watch of its
    // own tells the janitor which deferrals to drop (MachineOSConfigs are few: one per pool).
    let deferrals = Arc::new(Deferrals::default());
    let janitor = tokio::spawn(Janitor::new(Arc::clone(&deferrals)).run(api.clone()));
    let context = Arc::new(Context {
        api,
        engine,
        events,
        metrics: Arc::clone(&metrics),
        add_finalizers,
        store: controller.store(),
        deferrals,
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
    janitor.abort();
    // Only the leader reports deferred deletions.
    metrics.set_deferred(0, None);
    tracing::info!("finalizer controller stopped");
}

/// How often the controller looks whether the caches have synced.
const SYNC_POLL: Duration = Duration::from_millis(200);

/// Waits until every cache finished its first full list: the controller's decisions read
/// pools and MachineOSConfigs, and an empty cache would look like a settled cluster. Returns
/// false if `stop` came first.
async fn wait_for_caches<V: ClusterView>(view: &V, stop: &CancellationToken) -> bool {
    if !view.synced() {
        tracing::info!(
            "finalizer controller waiting for the caches to sync (its decisions read pools and MachineOSConfigs)"
        );
        while !view.synced() {
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(SYNC_POLL) => {}
            }
        }
    }
    tracing::info!("caches synced; finalizer controller starting");
    true
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
        Some(ctx.engine.check_within(target, CONFIRM_TIMEOUT).await)
    } else {
        None
    };
    let verdict = match &checked {
        Some(Checked::Decided(v)) => Some(v),
        Some(Checked::Unconfirmed { why, .. }) => {
            tracing::warn!(%name, %why, "cannot verify a deferred deletion; keeping the finalizer");
            None
        }
        None => None,
    };
    match finalizer::plan(meta, verdict, ctx.add_finalizers) {
        Step::Idle => {
            // Debug only: the one trace of a pass that writes nothing (tests wait for it).
            tracing::debug!(%name, add_finalizers = ctx.add_finalizers, "nothing to do");
            ctx.deferrals.forget(&uid);
            Ok(Action::requeue(RESYNC))
        }
        Step::Protect => {
            if let Some(patch) = finalizer::add_patch(meta, meta.resource_version.as_deref()) {
                patch_mosc(&ctx.api, name, meta.resource_version.as_deref(), patch).await?;
                tracing::info!(%name, finalizer = finalizer::FINALIZER, "added the finalizer");
            }
            Ok(Action::requeue(RESYNC))
        }
        Step::Remove(reason) => {
            let Some(patch) = finalizer::remove_patch(meta, meta.resource_version.as_deref(), None)
            else {
                return Ok(Action::await_change());
            };
            patch_mosc(&ctx.api, name, meta.resource_version.as_deref(), patch).await?;
            ctx.count_deferred(Some(&uid));
            let waited = meta
                .deletion_timestamp
                .as_ref()
                .map_or(0, |t| (Timestamp::now() - t.0).get_seconds().max(0));
            ctx.metrics.finalizer_removed(reason, waited as f64);
            ctx.deferrals.forget(&uid);
            tracing::info!(%name, ?reason, waited_seconds = waited, "removed the finalizer");
            let overridden_by = verdict
                .filter(|_| reason == RemovalReason::Overridden)
                .and_then(|v| v.override_reason.as_deref());
            let note = message::removed_note(overridden_by);
            ctx.record(&mosc, events::REASON_RELEASED, &note).await;
            Ok(Action::await_change())
        }
        Step::Wait { blocking_nodes } => {
            let (attempts, changed) = ctx.deferrals.with(&uid, |m| {
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

/// A conflict is retried at once; anything else with the same backoff as a deferral, and is
/// reported: a Warning Event on the object (identical ones count up one series) and the
/// `controller_errors` metric.
fn error_policy<V>(mosc: Arc<MachineOSConfig>, error: &Error, ctx: Arc<Context<V>>) -> Action {
    let failure = error.failure();
    ctx.metrics.controller_error(failure);
    if failure == Failure::Conflict {
        tracing::debug!(name = mosc.name(), %error, "stale read; retrying");
        return Action::requeue(retry_after(failure, 1));
    }
    let uid = mosc.metadata.uid.clone().unwrap_or_default();
    let attempts = ctx.deferrals.with(&uid, |m| {
        m.attempts = m.attempts.saturating_add(1);
        m.attempts
    });
    let retry = retry_after(failure, attempts);
    tracing::warn!(name = mosc.name(), %error, ?failure, retry_in = ?retry, "will retry");
    let note = format!(
        "mosc-guard could not update the finalizer {}: {error}; retrying in {}s",
        finalizer::FINALIZER,
        retry.as_secs()
    );
    let regarding = regarding(&mosc);
    let events = ctx.events.clone();
    tokio::spawn(async move {
        events
            .record(&regarding, true, REASON_PATCH_FAILED, &note)
            .await;
    });
    Action::requeue(retry)
}

/// What the controller's Events about `mosc` refer to.
fn regarding(mosc: &MachineOSConfig) -> ObjectReference {
    let uid = mosc.metadata.uid.as_deref();
    events::reference(TargetKind::MachineOSConfig, mosc.name(), uid)
}

/// Applies `patch` (planned from resourceVersion `planned`). A 422 is told apart: if the
/// object changed (or is gone) since `planned`, the patch's test failed on a stale read
/// ([`Error::Stale`]); otherwise the API server rejected the update itself.
async fn patch_mosc(
    api: &Api<MachineOSConfig>,
    name: &str,
    planned: Option<&str>,
    patch: json_patch::Patch,
) -> Result<(), Error> {
    let patch = Patch::Json::<()>(patch);
    let params = patch_params();
    let patched = tokio::time::timeout(PATCH_TIMEOUT, api.patch(name, &params, &patch)).await;
    let name = name.to_string();
    match patched {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(s))) if s.code == 422 => {
            let now = tokio::time::timeout(PATCH_TIMEOUT, api.get_opt(&name)).await;
            match now {
                Ok(Ok(current)) if changed_since(planned, current.as_ref()) => {
                    Err(Error::Stale { name })
                }
                _ => Err(Error::Patch {
                    name,
                    source: kube::Error::Api(s),
                }),
            }
        }
        Ok(Err(source)) => Err(Error::Patch { name, source }),
        Err(_) => Err(Error::PatchTimeout { name }),
    }
}

/// The parameters of mosc-guard's patches (the controller's, and `remove-finalizers`').
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

/// Whether the object read now (`None`: gone) differs from the resourceVersion a patch was
/// planned from.
fn changed_since(planned: Option<&str>, current: Option<&MachineOSConfig>) -> bool {
    current.is_none_or(|m| m.metadata.resource_version.as_deref() != planned)
}

/// 1, 2, 4, 8 s, then [`MAX_RETRY`].
fn backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(8);
    (FIRST_RETRY * 2u32.pow(exp)).min(MAX_RETRY)
}

#[cfg(test)]
mod tests;
