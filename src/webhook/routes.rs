//! The webhook's routes: `/validate` ([`admission`]), `/mutate` ([`mutation`]), and the
//! probes (from [`crate::server::probes`]) and metrics both listeners serve; the body limit and
//! request deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::routing::{get, post};
use tower_http::timeout::TimeoutLayer;

use crate::access::view::ClusterView;
use crate::decision::Engine;
use crate::server::probes::{self, Readiness};
use crate::webhook::admission::{self, Admission};
use crate::webhook::mutation;

/// The largest object a client can write in one request: the API server's request body
/// limit (its `--max-request-bytes` default, 3 MiB). Stored objects are smaller still (etcd's
/// default request limit is 1.5 MiB), but admission sees an object before it is stored.
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;
/// Room for the AdmissionReview around its objects (kinds, user info, options).
const ENVELOPE_BYTES: usize = 64 * 1024;
/// Largest AdmissionReview accepted: an UPDATE (a finalizer's removal) carries the object and
/// its oldObject, each up to [`MAX_OBJECT_BYTES`], so a cap of one object's size refused the
/// finalizer's removal from a large MachineOSConfig (failing closed).
pub const MAX_BODY_BYTES: usize = 2 * MAX_OBJECT_BYTES + ENVELOPE_BYTES;
/// `/metrics`' content type: the OpenMetrics text format.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The readiness of a guard deciding through `engine`: its view's (every cache synced, none
/// stale), until the drain begins.
pub fn readiness<V: ClusterView>(engine: &Arc<Engine<V>>) -> Readiness {
    let engine = Arc::clone(engine);
    Readiness::new(move || engine.view.readiness())
}

/// The application's routes. The admission's engine may be shared with the finalizer
/// controller.
pub fn router<V: ClusterView>(
    admission: impl Into<Arc<Admission<V>>>,
    request_timeout: Duration,
    readiness: Readiness,
) -> Router {
    let admission = admission.into();
    let ops = ops_router(Arc::clone(admission.engine()), readiness);
    Router::new()
        .route("/validate", post(admission::validate::<V>))
        .route("/mutate", post(mutation::mutate::<V>))
        .with_state(admission)
        .merge(ops)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
}

/// Only `/healthz`, `/readyz` and `/metrics`, for the second listener of
/// `serve --metrics-listen`: kubelet and Prometheus reach it without a client certificate, and
/// a NetworkPolicy can open it to the monitoring stack alone. Given the webhook's
/// `readiness`, its `/readyz` turns 503 with the webhook's (kubelet probes this port).
pub fn ops_router<V: ClusterView>(engine: Arc<Engine<V>>, readiness: Readiness) -> Router {
    let ready = readiness.clone();
    probes::routes(readiness).route(
        "/metrics",
        get(move || {
            let body = engine.render_metrics(ready.check().is_ok());
            async move { ([(header::CONTENT_TYPE, OPENMETRICS)], body) }
        }),
    )
}
