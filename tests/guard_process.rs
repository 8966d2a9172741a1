//! `mosc-guard serve` as a process against a real API server: readiness waits for every
//! cache, a missing CRD is retried rather than fatal, and SIGTERM shuts down cleanly.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::controlplane::ControlPlane;
use support::net::free_port;
use support::scenario::wait_for;

/// The guard process; killed and reaped on drop if a test fails before stopping it.
struct Serve {
    child: Child,
    url: String,
    log: std::path::PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(cp: &ControlPlane, dir: &Path) -> Serve {
        Self::start_with(cp, dir, &[])
    }

    fn start_with(cp: &ControlPlane, dir: &Path, extra: &[&str]) -> Serve {
        let port = free_port().expect("free port");
        let cert = cp
            .pki()
            .server_cert(&format!("guard-{port}"), &["127.0.0.1"])
            .expect("serving certificate");
        let log = dir.join("mosc-guard.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_mosc-guard"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--kubeconfig",
            ])
            .arg(cp.kubeconfig())
            .arg("--tls-cert-file")
            .arg(&cert.cert)
            .arg("--tls-key-file")
            .arg(&cert.key)
            .args(extra)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .expect("spawn mosc-guard serve");
        Serve {
            child,
            url: format!("https://127.0.0.1:{port}"),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn status(&self, http: &reqwest::Client, path: &str) -> Option<u16> {
        let resp = http.get(format!("{}{path}", self.url)).send().await.ok()?;
        Some(resp.status().as_u16())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_every_cache_and_a_missing_crd_is_retried() {
    let cp = ControlPlane::start().await.expect("control plane");
    let dir = tempfile::tempdir().expect("tempdir");
    let crd = "machineosbuilds.machineconfiguration.openshift.io";
    let out = cp
        .kubectl(["delete", "crd", crd, "--wait=true"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");

    let guard = Serve::start(&cp, dir.path());
    let http = support::tls::https_client(&cp.pki().ca_pem()).expect("client");
    wait_for(
        || async { Ok((guard.status(&http, "/healthz").await == Some(200)).then_some(())) },
        Duration::from_secs(30),
        "mosc-guard to serve /healthz",
    )
    .await
    .expect("live");
    // Several seconds without the MOSB API: alive, not ready, saying why in the log.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(
            guard.status(&http, "/readyz").await,
            Some(503),
            "{}",
            guard.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let metrics = http
        .get(format!("{}/metrics", guard.url))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    assert!(metrics.contains("mosc_guard_ready 0"), "{metrics}");
    let log = guard.log();
    assert!(
        log.contains("watch failed") && log.contains("machineosbuilds"),
        "{log}"
    );

    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/crds/machineosbuilds.yaml"
    );
    let out = cp
        .kubectl(["apply", "-f", manifest])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    wait_for(
        || async { Ok((guard.status(&http, "/readyz").await == Some(200)).then_some(())) },
        Duration::from_secs(90),
        "mosc-guard to become ready once the CRD exists",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_server_cleanly() {
    let cp = ControlPlane::start().await.expect("control plane");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut guard = Serve::start(&cp, dir.path());
    let http = support::tls::https_client(&cp.pki().ca_pem()).expect("client");
    wait_for(
        || async { Ok((guard.status(&http, "/readyz").await == Some(200)).then_some(())) },
        Duration::from_secs(30),
        "mosc-guard to be ready",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log()));

    let pid = libc::pid_t::try_from(guard.child.id()).expect("pid");
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = guard.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running 20 s after SIGTERM\n{}",
            guard.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}\n{}", guard.log());
    let log = guard.log();
    assert!(log.contains("shutdown signal received"), "{log}");
    assert!(log.contains("shutting down: no new connections"), "{log}");
    assert_eq!(
        guard.status(&http, "/healthz").await,
        None,
        "no longer listening"
    );
}

/// Item 3 (issue 10): after SIGTERM the guard keeps accepting connections for the drain delay,
/// with /readyz answering 503 so the endpoint is removed, then stops. A request sent 3 s after
/// SIGTERM, on a new connection, still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_a_few_seconds_after_sigterm_is_still_answered() {
    let cp = ControlPlane::start().await.expect("control plane");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut guard = Serve::start_with(&cp, dir.path(), &["--shutdown-delay", "6"]);
    let http = support::tls::https_client(&cp.pki().ca_pem()).expect("client");
    wait_for(
        || async { Ok((guard.status(&http, "/readyz").await == Some(200)).then_some(())) },
        Duration::from_secs(30),
        "mosc-guard to be ready",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log()));

    let pid = libc::pid_t::try_from(guard.child.id()).expect("pid");
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let signalled = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // New clients: each request goes over a connection opened after SIGTERM.
    let fresh = support::tls::https_client(&cp.pki().ca_pem()).expect("client");
    assert_eq!(
        guard.status(&fresh, "/readyz").await,
        Some(503),
        "not ready while draining\n{}",
        guard.log()
    );
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "after-sigterm",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "x",
            "namespace": "default",
            "operation": "DELETE",
            "userInfo": {"username": "admin"}
        }
    });
    let fresh = support::tls::https_client(&cp.pki().ca_pem()).expect("client");
    let resp = fresh
        .post(format!("{}/validate", guard.url))
        .json(&review)
        .send()
        .await
        .unwrap_or_else(|e| panic!("answered 3 s after SIGTERM: {e}\n{}", guard.log()));
    assert_eq!(resp.status().as_u16(), 200);
    let body: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(body["response"]["uid"], "after-sigterm");
    assert_eq!(body["response"]["allowed"], true);
    assert!(
        signalled.elapsed() < Duration::from_secs(6),
        "the request was made within the drain delay"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = guard.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "still running\n{}", guard.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}\n{}", guard.log());
    let log = guard.log();
    assert!(log.contains("draining: /readyz answers 503"), "{log}");
    assert_eq!(
        guard.status(&http, "/healthz").await,
        None,
        "no longer listening"
    );
}
