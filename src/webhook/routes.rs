//! The webhook's routes: `/validate`, `/mutate`, and the probes (from [`crate::server::probes`])
//! and metrics both listeners serve; the body limit and request deadline.

use std::sync::Arc;
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
use crate::server::probes::{self, Readiness};
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
    readiness: Readiness,
}

/// The readiness of a guard deciding through `reviewer`: its view's (every cache synced, none
/// stale), until the drain begins.
pub fn readiness<V: ClusterView>(reviewer: &Reviewer<V>) -> Readiness {
    let engine = Arc::clone(reviewer.engine());
    Readiness::new(move || engine.view.readiness())
}

/// The application's routes. The reviewer may be shared with the finalizer controller.
pub fn router<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    request_timeout: Duration,
    readiness: Readiness,
) -> Router {
    probes_and_metrics(readiness.clone())
        .route("/validate", post(validate::<V>))
        .route("/mutate", post(mutate::<V>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
        .with_state(app_state(reviewer, readiness))
}

/// Only `/healthz`, `/readyz` and `/metrics`, for the second listener of
/// `serve --metrics-listen`: kubelet and Prometheus reach it without a client certificate, and
/// a NetworkPolicy can open it to the monitoring stack alone. Given the webhook's
/// `readiness`, its `/readyz` turns 503 with the webhook's (kubelet probes this port).
pub fn ops_router<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    readiness: Readiness,
) -> Router {
    probes_and_metrics(readiness.clone()).with_state(app_state(reviewer, readiness))
}

/// The routes both listeners serve.
fn probes_and_metrics<V: ClusterView>(readiness: Readiness) -> Router<Arc<AppState<V>>> {
    probes::routes(readiness).route("/metrics", get(metrics::<V>))
}

fn app_state<V: ClusterView>(
    reviewer: impl Into<Arc<Reviewer<V>>>,
    readiness: Readiness,
) -> Arc<AppState<V>> {
    let reviewer = reviewer.into();
    Arc::new(AppState {
        metrics: Arc::clone(&reviewer.engine().metrics),
        reviewer,
        readiness,
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
        .render(&view.sizes(), &view.stale(), app.readiness.check().is_ok());
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
