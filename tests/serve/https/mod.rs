//! The webhook over real HTTPS: an in-process server on a loopback port, rcgen
//! certificates on disk, and a rustls client, exercising what the API server sends.
//!
//! One test binary; the fixtures, the in-process server and its client are here, the tests in
//! modules by what they exercise: [`decisions`] (verdicts and messages), [`transport`] (TLS,
//! HTTP versions, certificate rotation, shutdown), [`confirmation`] (the confirming fresh read),
//! [`connection_limits`] (stalled and idle connections).

mod confirmation;
mod connection_limits;
mod decisions;
mod transport;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mosc_guard::access::view::{ClusterView, StaticView};
use mosc_guard::core::model::{LABEL_MACHINE_OS_CONFIG, LABEL_TARGET_POOL, OVERRIDE_ANNOTATION};
use mosc_guard::core::policy::PolicyMode;
use mosc_guard::core::snapshot::Snapshot;
use mosc_guard::decision::{DeletionMode, Engine};
use mosc_guard::server::listener::{self, ConnectionLimits, Limits};
use mosc_guard::server::tls::{CertFiles, ReloadingResolver};
use mosc_guard::telemetry::metrics::Metrics;
use mosc_guard::webhook::admission::Admission;
use mosc_guard::webhook::routes::{self, MAX_BODY_BYTES};
use serde_json::{Value, json};
use testkit::pki::Pki;
use testkit::review::{MACHINE_OS_CONFIG, Review, Target};
use testkit::view::{FreshRead, ScriptedView};
use tokio::sync::oneshot;

const GROUP: &str = "machineconfiguration.openshift.io";
const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const NODE: &str = "ip-10-0-11-240.us-east-2.compute.internal";

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("fixture"))
}

/// A MOSC `worker` whose image node NODE is rolling to, plus a settled config `infra`.
fn cluster() -> Snapshot {
    Snapshot {
        machine_os_configs: vec![parse(mosc("worker", None)), parse(mosc("infra", None))],
        // As MCO writes it: both labels and a controller reference to the config.
        machine_os_builds: vec![parse(json!({
            "metadata": {"name": "worker-8f2a1c",
                "labels": {LABEL_MACHINE_OS_CONFIG: "worker", LABEL_TARGET_POOL: "worker"},
                "ownerReferences": [{"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig",
                    "name": "worker", "uid": "uid-worker", "controller": true}]},
            "status": {"digestedImagePushSpec": IMAGE}
        }))],
        pools: vec![parse(
            json!({"metadata": {"name": "worker"}, "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
        )],
        nodes: vec![parse(json!({"metadata": {
            "name": NODE,
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/desiredImage": IMAGE,
                "machineconfiguration.openshift.io/state": "Working"
            }
        }}))],
        release: mosc_guard::core::release::ClusterRelease::given("4.20.8"),
        ..Default::default()
    }
}

fn mosc(name: &str, override_reason: Option<&str>) -> Value {
    let mut meta = json!({"name": name, "uid": format!("uid-{name}")});
    if let Some(r) = override_reason {
        meta["annotations"] = json!({OVERRIDE_ANNOTATION: r});
    }
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig", "metadata": meta,
        "spec": {"machineConfigPool": {"name": name}, "renderedImagePushSpec": "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest"},
        "status": {"currentImagePullSpec": if name == "worker" { json!(IMAGE) } else { Value::Null }}
    })
}

/// An AdmissionReview as kube-apiserver sends it: `operation` on MachineOSConfig `old`, through
/// `resource`.
fn review(operation: &str, resource: &'static str, old: Value, dry_run: bool) -> Value {
    let target = Target {
        resource,
        ..MACHINE_OS_CONFIG
    };
    let review = match operation {
        "DELETE" => Review::delete(target, old),
        "CREATE" => Review::create(target, old),
        _ => Review::new(operation, target)
            .old_object(old.clone())
            .object(old),
    };
    review.dry_run(dry_run).json()
}

/// A running in-process server; stops when dropped.
struct Server {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _reloader: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self._reloader.abort();
    }
}

async fn start(files: CertFiles, snapshot: Snapshot) -> Server {
    start_with(files, StaticView(Arc::new(snapshot))).await
}

async fn start_with<V: ClusterView>(files: CertFiles, view: V) -> Server {
    start_in_mode(files, view, DeletionMode::Deny).await
}

async fn start_in_mode<V: ClusterView>(files: CertFiles, view: V, mode: DeletionMode) -> Server {
    start_limited(files, view, mode, ConnectionLimits::default()).await
}

async fn start_limited<V: ClusterView>(
    files: CertFiles,
    view: V,
    mode: DeletionMode,
    connection: ConnectionLimits,
) -> Server {
    start_with_limits(files, view, mode, short_limits(connection)).await
}

/// The tests' request, shutdown and header-read bounds (seconds, not `serve`'s defaults), with
/// `connection`'s.
fn short_limits(connection: ConnectionLimits) -> Limits {
    Limits {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        header_read_timeout: Duration::from_millis(500),
        connection,
    }
}

async fn start_with_limits<V: ClusterView>(
    files: CertFiles,
    view: V,
    mode: DeletionMode,
    limits: Limits,
) -> Server {
    let resolver = ReloadingResolver::load(files).expect("certificate loads");
    let metrics = Arc::new(Metrics::default());
    let reloader = resolver.spawn_reloader(Duration::from_millis(100), Arc::clone(&metrics));
    let tls = Arc::new(resolver.server_config(None).expect("tls config"));
    // As `serve` binds: a deep accept queue, so a flood of connections does not drop SYNs.
    let listener = listener::bind(([127, 0, 0, 1], 0).into()).expect("bind loopback");
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let mut admission = Admission::new(Engine::new(
        view,
        PolicyMode::InFlight,
        metrics,
        Duration::from_millis(500),
    ));
    admission.deletion_mode = mode;
    let (stop, stopped) = oneshot::channel::<()>();
    let readiness = routes::readiness(admission.engine());
    let app = routes::router(admission, limits.request_timeout, readiness);
    let task = tokio::spawn(async move {
        listener::serve(listener, tls, app, &limits, async {
            let _ = stopped.await;
        })
        .await
    });
    Server {
        url,
        stop: Some(stop),
        task,
        _reloader: reloader,
    }
}

fn client(
    ca_pem: &[u8],
    version: Option<&'static rustls::SupportedProtocolVersion>,
) -> reqwest::Client {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA accepted");
    }
    let versions = match version {
        Some(v) => vec![v],
        None => vec![&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&versions)
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

struct Setup {
    _dir: tempfile::TempDir,
    pki: Pki,
    server: Server,
    http: reqwest::Client,
}

async fn setup() -> Setup {
    setup_with(StaticView(Arc::new(cluster()))).await
}

/// A server over `view` with a fresh CA and serving certificate, and a client trusting it.
async fn setup_with<V: ClusterView>(view: V) -> Setup {
    setup_in_mode(view, DeletionMode::Deny).await
}

async fn setup_in_mode<V: ClusterView>(view: V, mode: DeletionMode) -> Setup {
    setup_with_limits(view, mode, short_limits(ConnectionLimits::default())).await
}

/// [`setup_in_mode`] with `limits`.
async fn setup_with_limits<V: ClusterView>(view: V, mode: DeletionMode, limits: Limits) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path()).expect("pki");
    let pair = pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("server cert");
    let files = CertFiles {
        cert: pair.cert,
        key: pair.key,
    };
    let server = start_with_limits(files, view, mode, limits).await;
    let http = client(pki.ca_pem().as_bytes(), None);
    Setup {
        _dir: dir,
        pki,
        server,
        http,
    }
}

async fn post(s: &Setup, body: &Value) -> Value {
    post_to(s, "/validate", body).await
}

async fn post_to(s: &Setup, path: &str, body: &Value) -> Value {
    let resp = s
        .http
        .post(format!("{}{path}", s.server.url))
        .json(body)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("review json")
}

/// A TLS connection to `url` that trusts `ca_pem`, speaking HTTP/1.1 by hand.
async fn raw_tls(
    url: &str,
    ca_pem: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA accepted");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let addr = url.trim_start_matches("https://");
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake with the old certificate")
}
