//! The HTTPS server: routes, limits, TLS accept loop and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower_http::timeout::TimeoutLayer;

use crate::metrics::Metrics;
use crate::review::Reviewer;
use crate::view::ClusterView;
use crate::{admission, mutation};

/// The largest object a client can write in one request: the API server's request body
/// limit (its `--max-request-bytes` default, 3 MiB). Stored objects are smaller still (etcd's
/// default request limit is 1.5 MiB), but admission sees an object before it is stored.
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;
/// Room for the AdmissionReview around its objects (kinds, user info, options).
const ENVELOPE_BYTES: usize = 64 * 1024;
/// Largest AdmissionReview accepted: an UPDATE (a finalizer's release) carries the object and
/// its oldObject, each up to [`MAX_OBJECT_BYTES`], so a cap of one object's size refused the
/// release of a large MachineOSConfig (failing closed).
pub const MAX_BODY_BYTES: usize = 2 * MAX_OBJECT_BYTES + ENVELOPE_BYTES;

pub struct Limits {
    /// Whole-request deadline; keep it under the webhook's timeoutSeconds.
    pub request_timeout: Duration,
    /// How long in-flight requests may finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// How long an HTTP/1 client may take to send its request headers (slow clients
    /// would otherwise hold connections open).
    pub header_read_timeout: Duration,
    /// Deadlines and caps per connection, whatever the protocol.
    pub connection: ConnectionLimits,
}

/// What one connection may hold: without these, a client that finishes TLS and then sends
/// nothing (or only the HTTP/2 preface) keeps one of the [`MAX_CONNECTIONS`] slots forever.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// From accept to a finished TLS handshake and the first complete request head (HTTP/1
    /// headers or an HTTP/2 HEADERS frame); a connection that has not got that far is closed.
    pub first_request: Duration,
    /// A connection with no request in flight for this long is closed. Longer than the idle
    /// timeout of Go's HTTP transport (90 s, the API server's), so the caller normally
    /// closes first and never races a new request against our close.
    pub idle: Duration,
    /// HTTP/2 PING interval, and how long a PING may go unanswered before the connection
    /// is dropped (a peer that vanished without a FIN).
    pub h2_keep_alive: Duration,
    /// Concurrent HTTP/2 streams per connection (hyper's default is 200).
    pub h2_max_streams: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            first_request: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            h2_keep_alive: Duration::from_secs(30),
            h2_max_streams: 32,
        }
    }
}

/// Connections served at once; more wait in the kernel's accept queue. The API server
/// keeps a few pooled connections per replica, so this only bounds misbehaving clients.
const MAX_CONNECTIONS: usize = 512;

struct AppState<V> {
    reviewer: Arc<Reviewer<V>>,
    metrics: Arc<Metrics>,
    draining: Draining,
}

/// The application's routes. The reviewer may be shared with the finalizer controller.
pub fn router<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    request_timeout: Duration,
) -> Router {
    router_with_drain(reviewer, request_timeout, Draining::default())
}

/// [`router`] whose `/readyz` answers 503 once `draining` has started (see [`drain_after`]).
pub fn router_with_drain<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    request_timeout: Duration,
    draining: Draining,
) -> Router {
    probes_and_metrics()
        .route("/validate", post(validate::<V>))
        .route("/mutate", post(mutate::<V>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
        .with_state(app_state(reviewer, draining))
}

/// Only `/healthz`, `/readyz` and `/metrics`, for the second listener of
/// `serve --metrics-listen`: kubelet and Prometheus reach it without a client certificate, and
/// a NetworkPolicy can open it to the monitoring stack alone. Its `/readyz` turns 503 with
/// the webhook's once `draining` has started (kubelet probes this port).
pub fn ops_router<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    draining: Draining,
) -> Router {
    probes_and_metrics().with_state(app_state(reviewer, draining))
}

/// The routes both listeners serve.
fn probes_and_metrics<V: ClusterView>() -> Router<Arc<AppState<V>>> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz::<V>))
        .route("/metrics", get(metrics::<V>))
}

fn app_state<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    draining: Draining,
) -> Arc<AppState<V>> {
    let reviewer = reviewer.into();
    Arc::new(AppState {
        metrics: Arc::clone(&reviewer.metrics),
        reviewer,
        draining,
    })
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

/// Defer mode's mutating webhook; in deny mode it never patches (a finalizer nobody releases
/// would strand the object), whatever webhook configuration points here.
async fn mutate<V: ClusterView>(State(app): State<Arc<AppState<V>>>, body: Bytes) -> Response {
    match admission::decode(&body) {
        Ok(req) => {
            let (outcome, resp) = mutation::review(&req, app.reviewer.adds_finalizers());
            tracing::debug!(uid = %req.uid, name = %req.name, result = ?outcome, "mutation");
            app.metrics.mutation(outcome);
            Json(admission::into_review(resp)).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "rejecting malformed admission request");
            (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
        }
    }
}

/// 200 while the webhook should get requests: every cache synced, none stale, not shutting
/// down. Otherwise 503 saying why (naming the caches).
async fn readyz<V: ClusterView>(State(app): State<Arc<AppState<V>>>) -> Response {
    match readiness(&app) {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

fn readiness<V: ClusterView>(app: &AppState<V>) -> Result<(), String> {
    if app.draining.started() {
        return Err("shutting down: draining connections before the server stops".into());
    }
    app.reviewer.view.readiness()
}

async fn metrics<V: ClusterView>(State(app): State<Arc<AppState<V>>>) -> Response {
    let view = &app.reviewer.view;
    let body = app
        .metrics
        .render(&view.sizes(), &view.stale(), readiness(&app).is_ok());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// Set once shutdown has begun: `/readyz` then answers 503, so the endpoint is taken out of
/// the Service while the server still accepts connections (see [`drain_after`]).
#[derive(Clone, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    pub fn start(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn started(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The first step of shutting down, to pass to [`serve`] as its `shutdown`: once `signal`
/// resolves (SIGTERM), `/readyz` turns 503 at once and connections are still accepted for
/// `delay`, while the endpoint's removal reaches every node (the Service keeps routing to the
/// pod until then; a refused connection would be a failed webhook call, and with
/// `failurePolicy: Fail` a refused deletion). Then [`serve`] stops accepting and finishes the
/// requests in flight.
pub async fn drain_after(signal: impl Future<Output = ()>, draining: Draining, delay: Duration) {
    signal.await;
    draining.start();
    tracing::info!(
        delay_seconds = delay.as_secs_f64(),
        "draining: /readyz answers 503; still accepting connections for the shutdown delay"
    );
    tokio::time::sleep(delay).await;
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
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let conn = Connection {
                        acceptor: acceptor.clone(),
                        app: app.clone(),
                        watcher: graceful.watcher(),
                        header_read_timeout: limits.header_read_timeout,
                        limits: limits.connection,
                    };
                    tokio::spawn(async move {
                        conn.serve(tcp, peer).await;
                        drop(slot);
                    });
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

/// What one accepted connection needs to be served.
struct Connection {
    acceptor: TlsAcceptor,
    app: Router,
    watcher: hyper_util::server::graceful::Watcher,
    header_read_timeout: Duration,
    limits: ConnectionLimits,
}

impl Connection {
    async fn serve(self, tcp: tokio::net::TcpStream, peer: SocketAddr) {
        let accepted = tokio::time::Instant::now();
        let handshake = self.acceptor.accept(tcp);
        let tls =
            match tokio::time::timeout_at(accepted + self.limits.first_request, handshake).await {
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
        let (activity, watched) = tokio::sync::watch::channel(Activity::new(accepted));
        let app = self.app;
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let in_flight = InFlight::start(&activity);
                let app = app.clone();
                async move {
                    let response = tower::ServiceExt::oneshot(app, req).await;
                    drop(in_flight);
                    response
                }
            });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(self.limits.h2_keep_alive))
            .keep_alive_timeout(self.limits.h2_keep_alive)
            .max_concurrent_streams(self.limits.h2_max_streams);
        let conn = self
            .watcher
            .watch(builder.serve_connection(TokioIo::new(tls), service));
        tokio::select! {
            result = conn => if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            },
            why = stalled(watched, self.limits) => {
                tracing::debug!(%peer, why, "closing connection");
            }
        }
    }
}

/// What a connection's requests have done so far.
#[derive(Clone, Copy, Debug)]
struct Activity {
    requests: u64,
    in_flight: usize,
    /// When the connection was accepted or its last request finished.
    since: tokio::time::Instant,
}

impl Activity {
    fn new(accepted: tokio::time::Instant) -> Self {
        Self {
            requests: 0,
            in_flight: 0,
            since: accepted,
        }
    }
}

/// Marks a request in flight on its connection until dropped (also when the request's
/// future is dropped, e.g. by the request timeout).
struct InFlight(tokio::sync::watch::Sender<Activity>);

impl InFlight {
    fn start(activity: &tokio::sync::watch::Sender<Activity>) -> Self {
        activity.send_modify(|a| {
            a.requests += 1;
            a.in_flight += 1;
        });
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            a.since = tokio::time::Instant::now();
        });
    }
}

/// Resolves when the connection should be closed: no first request within
/// `first_request` of accept, or nothing in flight for `idle`. Never while a request runs
/// (the request timeout bounds those).
async fn stalled(
    mut activity: tokio::sync::watch::Receiver<Activity>,
    limits: ConnectionLimits,
) -> &'static str {
    loop {
        let now = *activity.borrow_and_update();
        let deadline = match now {
            Activity {
                requests: 0, since, ..
            } => Some((
                since + limits.first_request,
                "no request before the deadline",
            )),
            Activity {
                in_flight: 0,
                since,
                ..
            } => Some((since + limits.idle, "idle")),
            _ => None,
        };
        let changed = activity.changed();
        match deadline {
            Some((at, why)) => tokio::select! {
                () = tokio::time::sleep_until(at) => return why,
                changed = changed => if changed.is_err() {
                    // The service is gone: the connection is ending by itself.
                    return std::future::pending().await;
                },
            },
            None => {
                if changed.await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}
