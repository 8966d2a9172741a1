//! What every controller loop of the simulator shares: the reconcile pass, the loop that runs
//! it, and the API server's answers they all look for.

use std::future::Future;

use tokio::task::JoinHandle;

use super::activity::IDLE_POLL;
use super::ctx::Ctx;
use crate::Result;

/// One reconcile pass over the current API state.
pub(super) trait Reconciler: Send + 'static {
    fn sync(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Whether work of the loop's own waits on time: a queued event, a timer, a running task.
    fn waiting(&self) -> bool;
}

/// Runs `reconciler.sync()` one poll interval after the last pass; after a quiet pass (no error,
/// no write by any loop, nothing [`Reconciler::waiting`]), once something changed
/// ([`super::activity`]). Logs each distinct error once.
pub(super) fn spawn_loop<R: Reconciler>(
    name: &'static str,
    ctx: Ctx,
    mut reconciler: R,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_error = String::new();
        let mut changes = ctx.activity.subscribe();
        loop {
            changes.borrow_and_update();
            let writes = ctx.activity.writes();
            let synced = match reconciler.sync().await {
                Ok(()) => {
                    last_error.clear();
                    true
                }
                Err(e) => {
                    let msg = e.to_string();
                    if msg != last_error {
                        tracing::warn!("sim {name}: {msg} (will retry)");
                        last_error = msg;
                    }
                    false
                }
            };
            tokio::time::sleep(ctx.cfg.poll_interval).await;
            if synced && ctx.activity.writes() == writes && !reconciler.waiting() {
                let _ = tokio::time::timeout(IDLE_POLL, changes.changed()).await;
            }
        }
    })
}

/// Now as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
pub(super) fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

/// Whether a kube error is the API server's 404.
pub(super) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is the API server's 409 (conflict / already exists).
pub(super) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
