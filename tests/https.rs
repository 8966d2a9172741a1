//! The webhook over real HTTPS: an in-process server on a loopback port, rcgen
//! certificates on disk, and a rustls client, exercising what the API server sends.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mosc_guard::core::model::{LABEL_MACHINE_OS_CONFIG, OVERRIDE_ANNOTATION};
use mosc_guard::core::policy::PolicyMode;
use mosc_guard::core::snapshot::Snapshot;
use mosc_guard::sources::view::{ClusterView, Fresh, FreshNodes, StaticView};
use mosc_guard::telemetry::metrics::Metrics;
use mosc_guard::webhook::listener::{self, ConnectionLimits, Limits};
use mosc_guard::webhook::review::{DeletionMode, Reviewer};
use mosc_guard::webhook::routes::{self, MAX_BODY_BYTES};
use mosc_guard::webhook::tls::{CertFiles, ReloadingResolver};
use serde_json::{Value, json};
use support::pki::Pki;
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
        machine_os_builds: vec![parse(json!({
            "metadata": {"name": "worker-8f2a1c", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
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

/// An AdmissionReview as kube-apiserver sends it.
fn review(operation: &str, resource: &str, old: Value, dry_run: bool) -> Value {
    let name = old["metadata"]["name"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3c9f2a58-5d0e-4a43-9d34-1f0b2b5e9e01",
            "kind": {"group": GROUP, "version": "v1", "kind": "MachineOSConfig"},
            "resource": {"group": GROUP, "version": "v1", "resource": resource},
            "requestKind": {"group": GROUP, "version": "v1", "kind": "MachineOSConfig"},
            "requestResource": {"group": GROUP, "version": "v1", "resource": resource},
            "name": name,
            "operation": operation,
            "userInfo": {"username": "kube:admin", "groups": ["system:cluster-admins"]},
            "object": if operation == "DELETE" { Value::Null } else { old.clone() },
            "oldObject": if operation == "CREATE" { Value::Null } else { old },
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}
        }
    })
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
    let resolver = ReloadingResolver::load(files).expect("certificate loads");
    let reloader = resolver.spawn_reloader(Duration::from_millis(100));
    let tls = Arc::new(resolver.server_config().expect("tls config"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let reviewer = Reviewer::new(
        view,
        PolicyMode::InFlight,
        Arc::new(Metrics::default()),
        Duration::from_millis(500),
    )
    .with_deletion_mode(mode);
    let limits = Limits {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        header_read_timeout: Duration::from_millis(500),
        connection,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let app = routes::router(reviewer, limits.request_timeout);
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
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path()).expect("pki");
    let pair = pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("server cert");
    let files = CertFiles {
        cert: pair.cert,
        key: pair.key,
    };
    let server = start_in_mode(files, view, mode).await;
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

#[tokio::test]
async fn denies_a_deletion_a_node_still_needs_with_an_actionable_message() {
    let s = setup().await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    let resp = &out["response"];
    assert_eq!(resp["uid"], "3c9f2a58-5d0e-4a43-9d34-1f0b2b5e9e01");
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 403);
    let msg = resp["status"]["message"].as_str().expect("message");
    assert!(msg.starts_with("machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it."), "{msg}");
    assert!(msg.contains(&format!("{NODE} (pool worker, state Working): desired .../ocb-image@sha256:01971adebd63..., current <none>")), "{msg}");
    assert!(
        msg.contains("oc annotate machineosconfig worker mosc-guard.dev/allow-deletion="),
        "{msg}"
    );
}

/// `mosc("worker")` carrying defer mode's finalizer.
fn protected_worker() -> Value {
    let mut object = mosc("worker", None);
    object["metadata"]["finalizers"] = json!(["mosc-guard.dev/wait-for-rollout"]);
    object
}

#[tokio::test]
async fn defer_mode_accepts_a_protected_config_with_a_warning_and_nothing_else() {
    let s = setup_in_mode(StaticView(Arc::new(cluster())), DeletionMode::Defer).await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", protected_worker(), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert_eq!(
        out["response"]["warnings"],
        json!([format!(
            "mosc-guard: deletion of machineosconfig \"worker\" deferred: 1 node still needs an image built from it ({NODE}); it completes when the rollout settles"
        )])
    );

    // Without the finalizer nothing would hold it: denied as in deny mode, saying why.
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false, "{out}");
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        msg.starts_with("machineosconfig \"worker\" cannot be deleted yet"),
        "{msg}"
    );
    assert!(
        msg.contains("does not carry the finalizer mosc-guard.dev/wait-for-rollout"),
        "{msg}"
    );

    // Builds are never deferred: their deletion removes the image at once.
    let build = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
        "metadata": {"name": "worker-8f2a1c", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
        "status": {"digestedImagePushSpec": IMAGE}});
    let out = post(&s, &review("DELETE", "machineosbuilds", build, false)).await;
    assert_eq!(out["response"]["allowed"], false, "{out}");

    // Deny mode ignores the finalizer.
    let deny = setup().await;
    let out = post(
        &deny,
        &review("DELETE", "machineosconfigs", protected_worker(), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false, "{out}");
}

#[tokio::test]
async fn mutate_adds_the_finalizer_in_defer_mode_only() {
    let create = review("CREATE", "machineosconfigs", mosc("worker", None), false);
    let defer = setup_in_mode(StaticView(Arc::new(cluster())), DeletionMode::Defer).await;
    let out = post_to(&defer, "/mutate", &create).await;
    let resp = &out["response"];
    assert_eq!(resp["allowed"], true, "{out}");
    assert_eq!(resp["patchType"], "JSONPatch");
    // kube-rs sends the patch bytes as a JSON array of numbers, which kube-apiserver decodes
    // into its []byte like base64 (the defer-mode end-to-end tests rely on it).
    let bytes: Vec<u8> = serde_json::from_value(resp["patch"].clone()).expect("patch bytes");
    let patch: Value = serde_json::from_slice(&bytes).expect("JSON patch");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/finalizers", "value": ["mosc-guard.dev/wait-for-rollout"]}])
    );

    // Already protected: nothing to patch. In deny mode: never, or no one would release it.
    let update = review("UPDATE", "machineosconfigs", protected_worker(), false);
    let out = post_to(&defer, "/mutate", &update).await;
    assert_eq!(
        (&out["response"]["allowed"], &out["response"]["patch"]),
        (&json!(true), &Value::Null)
    );
    let deny = setup().await;
    let out = post_to(&deny, "/mutate", &create).await;
    assert_eq!(
        (&out["response"]["allowed"], &out["response"]["patch"]),
        (&json!(true), &Value::Null)
    );
}

#[tokio::test]
async fn allows_a_safe_deletion_and_other_operations_untouched() {
    let s = setup().await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("infra", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"].get("warnings").is_none());
    for op in ["CREATE", "UPDATE"] {
        let out = post(
            &s,
            &review(op, "machineosconfigs", mosc("worker", None), false),
        )
        .await;
        assert_eq!(out["response"]["allowed"], true, "{op}");
        assert!(out["response"].get("warnings").is_none(), "{op}");
    }
    let mut other = review("DELETE", "machineconfigs", mosc("worker", None), false);
    other["request"]["resource"]["resource"] = json!("machineconfigs");
    assert_eq!(post(&s, &other).await["response"]["allowed"], true);
}

#[tokio::test]
async fn deleting_the_build_being_rolled_is_denied() {
    let s = setup().await;
    let mosb = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
        "metadata": {"name": "worker-8f2a1c", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
        "status": {"digestedImagePushSpec": IMAGE}
    });
    let out = post(&s, &review("DELETE", "machineosbuilds", mosb, false)).await;
    assert_eq!(out["response"]["allowed"], false);
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        msg.starts_with("machineosbuild \"worker-8f2a1c\" cannot be deleted yet"),
        "{msg}"
    );
}

#[tokio::test]
async fn override_allows_with_warnings() {
    let s = setup().await;
    let old = mosc("worker", Some("node is being replaced"));
    let out = post(&s, &review("DELETE", "machineosconfigs", old, false)).await;
    assert_eq!(out["response"]["allowed"], true);
    let warnings: Vec<&str> = out["response"]["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings[0].contains("node is being replaced"),
        "{warnings:?}"
    );
    assert!(warnings.iter().any(|w| w.contains(NODE)), "{warnings:?}");
}

#[tokio::test]
async fn dry_run_gets_the_same_verdict() {
    let s = setup().await;
    let wet = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    let dry = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), true),
    )
    .await;
    assert_eq!(dry["response"]["allowed"], false);
    assert_eq!(dry["response"]["status"], wet["response"]["status"]);
}

#[tokio::test]
async fn malformed_wrong_kind_and_oversized_requests_are_rejected_with_reasons() {
    let s = setup().await;
    let url = format!("{}/validate", s.server.url);
    let send = |body: Vec<u8>| {
        s.http
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let resp = send(b"{\"apiVersion\": ".to_vec()).await.expect("request");
    assert_eq!(resp.status(), 400);
    assert!(
        resp.text()
            .await
            .expect("body")
            .contains("not a valid AdmissionReview")
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    let resp = send(serde_json::to_vec(&pod).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 400);
    let text = resp.text().await.expect("body");
    assert!(text.contains("AdmissionReview"), "{text}");

    let mut v1beta1 = review("DELETE", "machineosconfigs", mosc("worker", None), false);
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = send(serde_json::to_vec(&v1beta1).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 400);
    assert!(
        resp.text()
            .await
            .expect("body")
            .contains("admission.k8s.io/v1beta1")
    );

    let mut huge = review("DELETE", "machineosconfigs", mosc("worker", None), false);
    huge["request"]["oldObject"]["spec"]["padding"] = json!("x".repeat(MAX_BODY_BYTES));
    let resp = send(serde_json::to_vec(&huge).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 413);
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let s = setup().await;
    let get = |path: &str| s.http.get(format!("{}{path}", s.server.url)).send();
    assert_eq!(get("/healthz").await.expect("healthz").status(), 200);
    assert_eq!(get("/readyz").await.expect("readyz").status(), 200);
    post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("infra", None), false),
    )
    .await;
    let text = get("/metrics")
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    for want in [
        "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"denied\"} 1",
        "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"allowed\"} 1",
        "mosc_guard_admission_decision_duration_seconds_count 2",
        "mosc_guard_confirmations_total{result=\"confirmed\"} 1",
        "mosc_guard_cache_objects{cache=\"nodes\"} 1",
        "mosc_guard_ready 1",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[tokio::test]
async fn serves_tls_1_2_and_1_3_over_http_1_and_2() {
    let s = setup().await;
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let http = client(s.pki.ca_pem().as_bytes(), Some(version));
        let resp = http
            .get(format!("{}/healthz", s.server.url))
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), 200, "{version:?}");
        assert_eq!(resp.version(), reqwest::Version::HTTP_2, "ALPN picks h2");
    }
}

/// Lays out certificate files the way kubelet projects a Secret volume:
/// `tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>/`, swapped atomically.
fn project_secret(volume: &Path, generation: &str, cert: &Path, key: &Path) {
    let data_dir = volume.join(format!("..{generation}"));
    std::fs::create_dir_all(&data_dir).expect("data dir");
    std::fs::copy(cert, data_dir.join("tls.crt")).expect("copy cert");
    std::fs::copy(key, data_dir.join("tls.key")).expect("copy key");
    let tmp = volume.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{generation}"), &tmp).expect("symlink");
    std::fs::rename(&tmp, volume.join("..data")).expect("atomic swap");
    for f in ["tls.crt", "tls.key"] {
        let link = volume.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(f), &link).expect("symlink");
        }
    }
}

/// A DELETE review of MOSC `worker` sent by hand over its own TLS connection: headers and
/// half the body first, the rest later, to keep a request in flight across an event.
struct HalfSent {
    conn: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    rest: Vec<u8>,
}

impl HalfSent {
    async fn start(url: &str, pki: &Pki) -> HalfSent {
        use tokio::io::AsyncWriteExt;
        let body = serde_json::to_vec(&review(
            "DELETE",
            "machineosconfigs",
            mosc("worker", None),
            false,
        ))
        .expect("json");
        let mut conn = raw_tls(url, pki.ca_pem().as_bytes()).await;
        let head = format!(
            "POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.expect("headers");
        let (first, rest) = body.split_at(body.len() / 2);
        conn.write_all(first).await.expect("half the body");
        HalfSent {
            conn,
            rest: rest.to_vec(),
        }
    }

    /// Sends the rest and expects the worker MOSC's denial on the same connection.
    async fn finish_with_a_denial(mut self) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.conn
            .write_all(&self.rest)
            .await
            .expect("rest of the body");
        let mut answer = String::new();
        self.conn
            .read_to_string(&mut answer)
            .await
            .expect("response");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("\"allowed\":false"), "{answer}");
    }
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

#[tokio::test]
async fn certificate_rotation_by_symlink_swap_needs_no_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old_pki = Pki::new(&dir.path().join("old")).expect("old pki");
    let new_pki = Pki::new(&dir.path().join("new")).expect("new pki");
    let old = old_pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("old cert");
    let new = new_pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("new cert");
    let volume = dir.path().join("volume");
    std::fs::create_dir_all(&volume).expect("volume");
    project_secret(&volume, "2026_11_30_01", &old.cert, &old.key);
    let server = start(
        CertFiles {
            cert: volume.join("tls.crt"),
            key: volume.join("tls.key"),
        },
        cluster(),
    )
    .await;
    let healthz = format!("{}/healthz", server.url);

    let trusts_old = client(old_pki.ca_pem().as_bytes(), None);
    let trusts_new = client(new_pki.ca_pem().as_bytes(), None);
    assert_eq!(
        trusts_old
            .get(&healthz)
            .send()
            .await
            .expect("old ok")
            .status(),
        200
    );
    assert!(
        trusts_new.get(&healthz).send().await.is_err(),
        "new CA not yet served"
    );

    // A request in flight across the swap: handshake and headers now, body later.
    let in_flight = HalfSent::start(&server.url, &old_pki).await;
    project_secret(&volume, "2026_11_30_02", &new.cert, &new.key);

    let mut rotated = false;
    for _ in 0..50 {
        if trusts_new.get(&healthz).send().await.is_ok() {
            rotated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rotated, "new certificate served within 5 s of the swap");
    in_flight.finish_with_a_denial().await;
    // The old client's pooled connection keeps working; its new handshakes would not.
    assert_eq!(
        trusts_old
            .get(&healthz)
            .send()
            .await
            .expect("pooled")
            .status(),
        200
    );
    let fresh_old = client(old_pki.ca_pem().as_bytes(), None);
    assert!(
        fresh_old.get(&healthz).send().await.is_err(),
        "old CA no longer served"
    );

    // A half-written rotation (garbage key) keeps the last good certificate in service.
    std::fs::write(dir.path().join("bad.key"), "not a key").expect("write");
    project_secret(
        &volume,
        "2026_11_30_03",
        &new.cert,
        &dir.path().join("bad.key"),
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let fresh_new = client(new_pki.ca_pem().as_bytes(), None);
    assert_eq!(
        fresh_new
            .get(&healthz)
            .send()
            .await
            .expect("still served")
            .status(),
        200
    );
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight_then_stops_accepting() {
    let mut s = setup().await;
    // A request in flight when the shutdown signal comes: headers and half the body sent.
    let in_flight = HalfSent::start(&s.server.url, &s.pki).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    if let Some(stop) = s.server.stop.take() {
        stop.send(()).expect("server listening for shutdown");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let fresh = client(s.pki.ca_pem().as_bytes(), None);
    assert!(
        fresh
            .get(format!("{}/healthz", s.server.url))
            .send()
            .await
            .is_err(),
        "no new connections after the signal"
    );
    in_flight.finish_with_a_denial().await;
    tokio::time::timeout(Duration::from_secs(10), &mut s.server.task)
        .await
        .expect("server stops within the grace period")
        .expect("server task");
}

/// A cache that lags behind the cluster: empty when cached, and a fresh read that
/// returns the real cluster, fails, or never answers.
struct LaggingView {
    fresh: FreshRead,
}

enum FreshRead {
    Cluster(Snapshot),
    Fails(&'static str),
    Hangs,
}

impl ClusterView for LaggingView {
    fn objects(&self) -> Snapshot {
        Snapshot::default()
    }

    fn nodes(
        &self,
        _: Option<&std::collections::BTreeSet<String>>,
        _: PolicyMode,
    ) -> Vec<Arc<mosc_guard::core::node::NodeMeta>> {
        Vec::new()
    }

    fn fresh(&self) -> futures::future::BoxFuture<'_, Result<Fresh, String>> {
        Box::pin(async move {
            match &self.fresh {
                FreshRead::Cluster(s) => Ok(Fresh {
                    objects: Snapshot {
                        nodes: Vec::new(),
                        ..s.clone()
                    },
                    nodes: FreshNodes::Listed(s.nodes.clone()),
                }),
                FreshRead::Fails(e) => Err(e.to_string()),
                FreshRead::Hangs => std::future::pending().await,
            }
        })
    }

    fn ready(&self) -> bool {
        true
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

async fn lagging(fresh: FreshRead) -> Setup {
    setup_with(LaggingView { fresh }).await
}

#[tokio::test]
async fn a_stale_cache_allow_is_overturned_by_the_fresh_read() {
    let s = lagging(FreshRead::Cluster(cluster())).await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false);
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(msg.contains(NODE), "{msg}");
    let metrics = s
        .http
        .get(format!("{}/metrics", s.server.url))
        .send()
        .await
        .expect("metrics");
    let text = metrics.text().await.expect("body");
    assert!(
        text.contains("mosc_guard_confirmations_total{result=\"overturned\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn an_allow_that_cannot_be_verified_is_denied_saying_why() {
    for (fresh, why) in [
        (FreshRead::Fails("connection refused"), "connection refused"),
        (FreshRead::Hangs, "took longer than 0.5s"),
    ] {
        let s = lagging(fresh).await;
        let out = post(
            &s,
            &review("DELETE", "machineosconfigs", mosc("infra", None), false),
        )
        .await;
        assert_eq!(out["response"]["allowed"], false, "{why}");
        assert_eq!(out["response"]["status"]["code"], 403, "{why}");
        let msg = out["response"]["status"]["message"]
            .as_str()
            .expect("message");
        assert!(msg.contains("could not verify"), "{msg}");
        assert!(msg.contains(why), "{msg}");
        assert!(msg.contains("fails closed"), "{msg}");
    }
}

#[tokio::test]
async fn the_override_still_applies_when_the_guard_cannot_verify() {
    let s = lagging(FreshRead::Fails("connection refused")).await;
    let old = mosc("infra", Some("API server maintenance, pool idle"));
    let out = post(&s, &review("DELETE", "machineosconfigs", old, false)).await;
    assert_eq!(out["response"]["allowed"], true);
    let warning = out["response"]["warnings"][0].as_str().expect("warning");
    assert!(
        warning.contains("without verification: reading nodes, builds, pools and MachineOSConfigs"),
        "{warning}"
    );
    assert!(
        warning.contains("API server maintenance, pool idle"),
        "{warning}"
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = setup().await;
    let mut conn = raw_tls(&s.server.url, s.pki.ca_pem().as_bytes()).await;
    conn.write_all(b"POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .expect("partial headers");
    let mut buf = Vec::new();
    let started = std::time::Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server closed the connection (header read timeout)"
    );
    // The server's timer starts when it takes the connection, a moment before `started`.
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "closed for the timeout, not at once for another reason"
    );
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

/// Short connection deadlines, so the slow-client tests can wait them out.
fn stall_limits() -> ConnectionLimits {
    ConnectionLimits {
        first_request: Duration::from_secs(1),
        idle: Duration::from_secs(1),
        ..ConnectionLimits::default()
    }
}

async fn setup_limited(connection: ConnectionLimits) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path()).expect("pki");
    let pair = pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("server cert");
    let files = CertFiles {
        cert: pair.cert,
        key: pair.key,
    };
    let view = StaticView(Arc::new(cluster()));
    let server = start_limited(files, view, DeletionMode::Deny, connection).await;
    let http = client(pki.ca_pem().as_bytes(), None);
    Setup {
        _dir: dir,
        pki,
        server,
        http,
    }
}

/// A TLS client configuration trusting `ca_pem` that offers `alpn`.
fn tls_connector(ca_pem: &[u8], alpn: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA accepted");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// SETTINGS_MAX_CONCURRENT_STREAMS from the first frame a server sent, if that frame is
/// its SETTINGS.
fn max_concurrent_streams(frame: &[u8]) -> Option<u32> {
    let header = frame.get(..9)?;
    let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    if header[3] != 0x4 {
        return None;
    }
    frame.get(9..9 + len)?.chunks_exact(6).find_map(|p| {
        (u16::from_be_bytes([p[0], p[1]]) == 0x3)
            .then(|| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
    })
}

/// How one stalled connection went: when its TLS handshake finished, when the server closed
/// it, and the stream cap its SETTINGS announced (HTTP/2 preface connections only).
struct Stalled {
    handshake_done: Option<std::time::Instant>,
    closed: std::time::Instant,
    max_streams: Option<u32>,
}

/// Connects, finishes TLS, sends only the HTTP/2 preface (`h2`) or nothing, and reads until
/// the server closes the connection.
async fn stall(
    addr: String,
    connector: tokio_rustls::TlsConnector,
    h2: bool,
    handshakes: Arc<std::sync::atomic::AtomicUsize>,
) -> Stalled {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    let mut tls = match connector.connect(name, tcp).await {
        Ok(tls) => tls,
        // The server may give up on a handshake that finished too late under load.
        Err(_) => {
            return Stalled {
                handshake_done: None,
                closed: std::time::Instant::now(),
                max_streams: None,
            };
        }
    };
    let handshake_done = std::time::Instant::now();
    handshakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // Under load the server's deadline may already have closed it: that is a close too.
    if h2 && tls.write_all(H2_PREFACE).await.is_err() {
        return Stalled {
            handshake_done: Some(handshake_done),
            closed: std::time::Instant::now(),
            max_streams: None,
        };
    }
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded by the caller's timeout; each read either returns data or the close.
    loop {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if first.len() < 4096 {
                    first.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
    Stalled {
        handshake_done: Some(handshake_done),
        closed: std::time::Instant::now(),
        max_streams: max_concurrent_streams(&first),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hundred_stalled_connections_do_not_stop_a_real_request() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const STALLED: usize = 600;
    let limits = stall_limits();
    let s = setup_limited(limits).await;
    let addr = s.server.url.trim_start_matches("https://").to_string();
    let ca = s.pki.ca_pem();
    let (h1, h2) = (
        tls_connector(ca.as_bytes(), b"http/1.1"),
        tls_connector(ca.as_bytes(), b"h2"),
    );
    let handshakes = Arc::new(AtomicUsize::new(0));
    let mut stalled = tokio::task::JoinSet::new();
    for i in 0..STALLED {
        let connector = if i % 2 == 0 { h1.clone() } else { h2.clone() };
        stalled.spawn(stall(
            addr.clone(),
            connector,
            i % 2 == 1,
            Arc::clone(&handshakes),
        ));
    }
    // Wait until the server has taken its 512 connections (the rest queue in the backlog).
    for _ in 0..300 {
        if handshakes.load(Ordering::SeqCst) >= 512 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every slot is held by a client that sends nothing. A real request must still be
    // answered well within the webhook's 10 s timeout.
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        s.http
            .post(format!("{}/validate", s.server.url))
            .json(&review(
                "DELETE",
                "machineosconfigs",
                mosc("worker", None),
                false,
            ))
            .send(),
    )
    .await;
    let resp = answered
        .expect("answered within 10 s although 600 connections stall")
        .expect("request");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("review");
    assert_eq!(body["response"]["allowed"], false, "{body}");

    let mut outcomes = Vec::new();
    let all = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(done) = stalled.join_next().await {
            outcomes.push(done.expect("stalled client task"));
        }
    })
    .await;
    assert!(
        all.is_ok(),
        "every stalled connection was closed by the server"
    );
    assert_eq!(outcomes.len(), STALLED);
    let margin = Duration::from_secs(3);
    let mut h2_settings = 0;
    for o in &outcomes {
        if let Some(done) = o.handshake_done {
            let held = o.closed.duration_since(done);
            assert!(
                held <= limits.first_request + margin,
                "a stalled connection was held {held:?}, deadline {:?}",
                limits.first_request
            );
        }
        if let Some(streams) = o.max_streams {
            assert_eq!(
                streams, limits.h2_max_streams,
                "HTTP/2 stream cap announced"
            );
            h2_settings += 1;
        }
    }
    assert!(
        h2_settings > 0,
        "some HTTP/2 preface connections got the server's SETTINGS"
    );
}

/// A GET /healthz on stream 1 as one HTTP/2 HEADERS frame (END_STREAM | END_HEADERS), HPACK
/// by hand: indexed :method GET, :scheme https, literal :path and :authority.
fn h2_get_healthz() -> Vec<u8> {
    let mut block = vec![0x82, 0x87, 0x44, 8];
    block.extend_from_slice(b"/healthz");
    block.extend_from_slice(&[0x41, 9]);
    block.extend_from_slice(b"127.0.0.1");
    let len = u32::try_from(block.len())
        .expect("small block")
        .to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], 0x1, 0x5, 0, 0, 0, 1];
    frame.extend_from_slice(&block);
    frame
}

/// HTTP/1 keep-alive connections are closed by hyper's header read timeout; an HTTP/2
/// connection had no such timer: it must be closed once nothing has been in flight for `idle`.
#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = stall_limits();
    let s = setup_limited(limits).await;
    let connector = tls_connector(s.pki.ca_pem().as_bytes(), b"h2");
    let addr = s.server.url.trim_start_matches("https://");
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    let mut conn = connector.connect(name, tcp).await.expect("handshake");
    let mut request = H2_PREFACE.to_vec();
    request.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // empty SETTINGS
    request.extend_from_slice(&h2_get_healthz());
    conn.write_all(&request).await.expect("request");
    // Read frames until the response's END_STREAM (a DATA frame on stream 1 with flag 0x1).
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let answered = tokio::time::timeout(Duration::from_secs(5), async {
        for _ in 0..64 {
            let n = conn.read(&mut buf).await.expect("read");
            assert!(n > 0, "connection closed before the response");
            got.extend_from_slice(&buf[..n]);
            let mut at = 0;
            while let Some(h) = got.get(at..at + 9) {
                let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                if h[3] == 0x0 && h[4] & 0x1 == 1 && h[5..9] == [0, 0, 0, 1] {
                    return;
                }
                at += 9 + len;
            }
        }
        panic!("no response on stream 1");
    })
    .await;
    assert!(answered.is_ok(), "GET /healthz answered over HTTP/2");
    let idle_since = std::time::Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        limits.idle + Duration::from_secs(3),
        conn.read_to_end(&mut rest),
    )
    .await;
    assert!(
        closed.is_ok(),
        "idle HTTP/2 connection closed within idle + 3 s"
    );
    assert!(
        idle_since.elapsed() >= limits.idle - Duration::from_millis(100),
        "closed for being idle, not at once"
    );
}

/// A cache that would allow everything, and a slow fresh read that counts how often it runs.
struct CountingView {
    reads: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClusterView for CountingView {
    fn objects(&self) -> Snapshot {
        Snapshot::default()
    }

    fn nodes(
        &self,
        _: Option<&std::collections::BTreeSet<String>>,
        _: PolicyMode,
    ) -> Vec<Arc<mosc_guard::core::node::NodeMeta>> {
        Vec::new()
    }

    fn fresh(&self) -> futures::future::BoxFuture<'_, Result<Fresh, String>> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(Fresh::default())
        })
    }

    fn ready(&self) -> bool {
        true
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

/// A burst of allowable reviews (forged, or garbage collection deleting builds) shares the
/// confirming reads instead of costing one node list each; each is still confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_allowable_reviews_shares_the_confirming_read() {
    const BURST: usize = 20;
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = setup_with(CountingView {
        reads: Arc::clone(&reads),
    })
    .await;
    let body = review("DELETE", "machineosconfigs", mosc("infra", None), false);
    let answers = futures::future::join_all((0..BURST).map(|_| post(&s, &body))).await;
    for out in &answers {
        assert_eq!(out["response"]["allowed"], true, "{out}");
    }
    let reads = reads.load(std::sync::atomic::Ordering::SeqCst);
    // One read for the first arrivals, one for everyone who came while it ran; stragglers
    // scheduled late on a loaded machine may need a few more. Without coalescing it is one per
    // review.
    assert!(
        (1..=BURST / 4).contains(&reads),
        "{BURST} concurrent reviews cost {reads} fresh reads"
    );
}
