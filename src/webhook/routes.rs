//! The webhook's routes: `/validate`, `/mutate`, and the probes and metrics both listeners
//! serve; the body limit and request deadline; readiness, which turns 503 while draining.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use tower_http::timeout::TimeoutLayer;

use crate::core::policy::{Deletion, Verdict};
use crate::core::recovery::stuck::stuck_per_pool;
use crate::sources::error::NotReady;
use crate::sources::view::ClusterView;
use crate::telemetry::metrics::{Blocked, Metrics};
use crate::webhook::admission;
use crate::webhook::mutation;
use crate::webhook::review::Reviewer;

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
        metrics: Arc::clone(&reviewer.engine().metrics),
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

fn readiness<V: ClusterView>(app: &AppState<V>) -> Result<(), NotReady> {
    if app.draining.started() {
        return Err(NotReady::Draining);
    }
    app.reviewer.engine().view.readiness()
}

async fn metrics<V: ClusterView>(State(app): State<Arc<AppState<V>>>) -> Response {
    let view = &app.reviewer.engine().view;
    let mut objects = view.objects();
    app.metrics.release_rules(&objects.rules());
    app.metrics
        .deletion_blocked(objects.machine_os_configs.iter().map(|mosc| {
            let v = app
                .reviewer
                .engine()
                .cached(Deletion::MachineOSConfig(mosc));
            (mosc.name().to_string(), blocked_by(&v))
        }));
    objects.nodes = view.unreached_nodes();
    app.metrics.nodes_stuck(stuck_per_pool(&objects));
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

/// The first reason a verdict refuses, for the deletion-blocked gauge.
fn blocked_by(v: &Verdict) -> Blocked {
    if v.allowed {
        Blocked::No
    } else if !v.blocking.is_empty() {
        Blocked::Node
    } else if !v.rolling.is_empty() {
        Blocked::Pool
    } else {
        Blocked::Machine
    }
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
