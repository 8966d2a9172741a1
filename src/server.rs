//! The HTTPS server: routes, limits, TLS accept loop and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower_http::timeout::TimeoutLayer;

use crate::admission;
use crate::metrics::Metrics;
use crate::review::Reviewer;
use crate::view::ClusterView;

/// Largest AdmissionReview accepted; the API server caps objects at 3 MiB too.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Limits {
    /// Whole-request deadline; keep it under the webhook's timeoutSeconds.
    pub request_timeout: Duration,
    /// How long in-flight requests may finish after a shutdown signal.
    pub shutdown_grace: Duration,
}

struct AppState<V> {
    reviewer: Reviewer<V>,
    metrics: Arc<Metrics>,
}

/// The application's routes.
pub fn router<V: ClusterView>(reviewer: Reviewer<V>, request_timeout: Duration) -> Router {
    let state = Arc::new(AppState {
        metrics: Arc::clone(&reviewer.metrics),
        reviewer,
    });
    Router::new()
        .route("/validate", post(validate::<V>))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz::<V>))
        .route("/metrics", get(metrics::<V>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
        .with_state(state)
}

async fn validate<V: ClusterView>(State(app): State<Arc<AppState<V>>>, body: Bytes) -> Response {
    match admission::decode(&body) {
        Ok(req) => {
            let resp = app.reviewer.review(&req).await;
            Json(admission::into_review(resp)).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "rejecting malformed admission request");
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
    }
}

async fn readyz<V: ClusterView>(State(app): State<Arc<AppState<V>>>) -> Response {
    if app.reviewer.view.ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "caches have not finished their first full list",
        )
            .into_response()
    }
}

async fn metrics<V: ClusterView>(State(app): State<Arc<AppState<V>>>) -> Response {
    let view = &app.reviewer.view;
    let body = app.metrics.render(&view.sizes(), view.ready());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then stops accepting
/// and lets in-flight connections finish within the grace period.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let watcher = graceful.watcher();
                    tokio::spawn(serve_connection(acceptor.clone(), tcp, peer, app.clone(), watcher));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over; closing remaining connections");
    }
}

async fn serve_connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let service = TowerToHyperService::new(app);
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
