//! One AdmissionReview round trip over HTTPS (the harness's client: HTTP/1.1, kept alive): mosc-guard's
//! `/validate` against a no-op webhook measured in the same run, served by the same TLS
//! server code, so the difference is what the guard's decoding and decision cost.
//!
//! Run: `cargo bench --bench webhook` (figures are recorded in BENCHMARKS.md).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::Json;
use axum::routing::post;
use criterion::Criterion;
use mosc_guard::access::view::StaticView;
use mosc_guard::core::policy::PolicyMode;
use mosc_guard::core::snapshot::Snapshot;
use mosc_guard::decision::Engine;
use mosc_guard::server::listener::{self, Limits};
use mosc_guard::server::tls::{CertFiles, ReloadingResolver};
use mosc_guard::telemetry::metrics::Metrics;
use mosc_guard::webhook::admission::Admission;
use mosc_guard::webhook::routes;
use serde_json::{Value, json};
use testkit::pki::Pki;
use testkit::review::{MACHINE_OS_CONFIG, Review, allow};

const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("bench fixture"))
}

/// 1,000 worker nodes, one of them rolling to the worker config's image.
fn cluster() -> Snapshot {
    let node = |i: usize| {
        let mut ann = json!({"machineconfiguration.openshift.io/state": "Done"});
        if i == 0 {
            ann = json!({
                "machineconfiguration.openshift.io/state": "Working",
                "machineconfiguration.openshift.io/desiredImage": IMAGE
            });
        }
        parse(json!({"metadata": {
            "name": format!("node-{i}"),
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": ann
        }}))
    };
    Snapshot {
        machine_os_configs: vec![parse(mosc())],
        machine_os_builds: vec![parse(json!({
            "metadata": {"name": "worker-1", "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
            "status": {"digestedImagePushSpec": IMAGE}
        }))],
        pools: vec![parse(
            json!({"metadata": {"name": "worker"}, "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
        )],
        nodes: (0..1_000).map(node).collect(),
        ..Default::default()
    }
}

fn mosc() -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": "worker"},
        "spec": {"machineConfigPool": {"name": "worker"}},
        "status": {"currentImagePullSpec": IMAGE}
    })
}

fn review() -> Value {
    Review::delete(MACHINE_OS_CONFIG, mosc())
        .user("kube:admin")
        .json()
}

/// The baseline: decode the review, allow it, echo the uid.
async fn noop(Json(review): Json<Value>) -> Json<Value> {
    Json(allow(&review))
}

/// Serves `app` over TLS on a loopback port; returns its URL.
async fn serve(app: Router, tls: Arc<rustls::ServerConfig>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let limits = Limits {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(1),
        header_read_timeout: Duration::from_secs(5),
        connection: listener::ConnectionLimits::default(),
    };
    tokio::spawn(async move {
        listener::serve(listener, tls, app, &limits, std::future::pending()).await
    });
    url
}

fn main() {
    testkit::tls::ensure_crypto_provider();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path()).expect("pki");
    let pair = pki.server_cert("bench", &["127.0.0.1"]).expect("cert");
    let resolver = ReloadingResolver::load(CertFiles {
        cert: pair.cert,
        key: pair.key,
    })
    .expect("certificate");
    let tls = Arc::new(resolver.server_config(None).expect("tls"));
    let admission = Admission::new(Engine::new(
        StaticView(Arc::new(cluster())),
        PolicyMode::InFlight,
        Arc::new(Metrics::default()),
        Duration::from_secs(5),
    ));
    let readiness = routes::readiness(admission.engine());
    let guard_url = rt.block_on(serve(
        routes::router(admission, Duration::from_secs(5), readiness),
        Arc::clone(&tls),
    ));
    let noop_url = rt.block_on(serve(Router::new().route("/validate", post(noop)), tls));
    let http = testkit::tls::https_client(&pki.ca_pem()).expect("client");
    let body = serde_json::to_vec(&review()).expect("json");

    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("admission-round-trip");
    for (name, url, want_allowed) in [
        ("noop-webhook", &noop_url, true),
        ("mosc-guard-deny", &guard_url, false),
    ] {
        let url = format!("{url}/validate");
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let resp = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await
                        .expect("request");
                    let out: Value = resp.json().await.expect("review");
                    assert_eq!(out["response"]["allowed"], want_allowed);
                })
            })
        });
    }
    group.finish();
    c.final_summary();
}
