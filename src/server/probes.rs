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
mod tests {
    use super::*;

    #[tokio::test]
    async fn readyz_follows_the_check_until_the_drain_begins() {
        use tower::ServiceExt;
        let cluster_ready = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cluster_ready);
        let readiness = Readiness::new(move || {
            if flag.load(Ordering::Acquire) {
                Ok(())
            } else {
                Err(NotReady::Unsynced(vec!["nodes"]))
            }
        });
        let app: Router = routes(readiness.clone());
        let get = |path: &'static str| {
            let app = app.clone();
            async move {
                let response = app
                    .oneshot(
                        axum::http::Request::get(path)
                            .body(axum::body::Body::empty())
                            .expect("request"),
                    )
                    .await
                    .expect("answered");
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), 1024)
                    .await
                    .expect("body");
                (status, String::from_utf8_lossy(&body).into_owned())
            }
        };
        assert_eq!(get("/healthz").await.0, StatusCode::OK);
        let (status, why) = get("/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(why.contains("nodes"), "{why}");
        cluster_ready.store(true, Ordering::Release);
        assert_eq!(get("/readyz").await.0, StatusCode::OK);
        let (signal, received) = tokio::sync::oneshot::channel::<()>();
        let drain = tokio::spawn(drain_after(
            async {
                let _ = received.await;
            },
            readiness.clone(),
            Duration::ZERO,
        ));
        assert_eq!(readiness.check(), Ok(()), "ready until the signal");
        signal.send(()).expect("drain waiting");
        drain.await.expect("drained");
        let (status, why) = get("/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(why.contains("shutting down"), "{why}");
        assert_eq!(
            get("/healthz").await.0,
            StatusCode::OK,
            "alive while draining"
        );
    }
}
