//! `/healthz` and `/readyz`, and the drain at shutdown: the server answers for its own state
//! (draining) and asks the readiness check it was given (the caches') for the rest.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use crate::access::error::NotReady;

/// Whether the guard should get requests: not once the drain has begun, otherwise as the
/// check says. Clones share the drain.
#[derive(Clone)]
pub struct Readiness {
    draining: Arc<AtomicBool>,
    check: Arc<dyn Fn() -> Result<(), NotReady> + Send + Sync>,
}

impl Readiness {
    pub fn new(check: impl Fn() -> Result<(), NotReady> + Send + Sync + 'static) -> Self {
        Self {
            draining: Arc::default(),
            check: Arc::new(check),
        }
    }

    /// `Ok` while the guard should get requests, else why not.
    pub fn check(&self) -> Result<(), NotReady> {
        if self.draining.load(Ordering::Acquire) {
            return Err(NotReady::Draining);
        }
        (self.check)()
    }
}

/// `/healthz` (200 while the process answers) and `/readyz` (200 while `readiness` says so,
/// else 503 saying why), for any router to merge.
pub fn routes<S: Clone + Send + Sync + 'static>(readiness: Readiness) -> Router<S> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let answer = readiness.check().map(|()| "ok");
                async move {
                    answer.map_err(|why| (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")))
                }
            }),
        )
}

/// The first step of shutting down, to pass to [`super::listener::serve`] as its `shutdown`:
/// once `signal` resolves (SIGTERM), `/readyz` turns 503 at once and connections are still
/// accepted for `delay`, while the endpoint's removal reaches every node (the Service keeps
/// routing to the pod until then; a refused connection would be a failed webhook call, and with
/// `failurePolicy: Fail` a refused deletion). Then the listener stops accepting and finishes
/// the requests in flight.
pub async fn drain_after(signal: impl Future<Output = ()>, readiness: Readiness, delay: Duration) {
    signal.await;
    readiness.draining.store(true, Ordering::Release);
    tracing::info!(
        delay_seconds = delay.as_secs_f64(),
        "draining: /readyz answers 503; still accepting connections for the shutdown delay"
    );
    tokio::time::sleep(delay).await;
}

#[cfg(test)]
mod tests;
