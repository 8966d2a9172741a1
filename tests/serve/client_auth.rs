//! `serve --client-ca-file`: only a caller with a certificate from the configured CA gets the
//! webhook; probes and metrics move to `--metrics-listen`. End to end with a real kube-apiserver that presents a client certificate to the
//! webhook (`--admission-control-config-file` with a WebhookAdmissionConfiguration whose
//! kubeconfig names the webhook's host `127.0.0.1:PORT`).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco::GROUP;
use testkit::pki::{CertPair, Pki};
use testkit::review::{MACHINE_OS_BUILD, MACHINE_OS_CONFIG, Review};
use testkit::webhooks::register_validating_webhook;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// An AdmissionReview deleting MachineOSConfig `name`, as the API server would send it.
fn review(name: &str) -> Value {
    let old = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig",
                     "metadata": {"name": name}, "spec": {"machineConfigPool": {"name": name}}});
    Review::delete(MACHINE_OS_CONFIG, old)
        .uid("7d1f7c0e-0000-4000-8000-000000000001")
        .user("attacker")
        .json()
}

/// An HTTPS client trusting `ca_pem`, presenting `cert` if given.
fn client(ca_pem: &str, cert: Option<&CertPair>) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("CA accepted");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match cert {
        Some(pair) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&pair.cert)
                .expect("cert file")
                .collect::<Result<_, _>>()
                .expect("cert PEM");
            let key = PrivateKeyDer::from_pem_file(&pair.key).expect("key PEM");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client cert")
        }
        None => builder.with_no_client_auth(),
    };
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .no_proxy()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("client")
}

/// The admission configuration: both webhook plugins present `cert` to `127.0.0.1:port`.
fn admission_config(dir: &Path, port: u16, cert: &CertPair) -> std::path::PathBuf {
    let kubeconfig = dir.join("webhook-client.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"127.0.0.1:{port}\"\n  user:\n    \
             client-certificate: {}\n    client-key: {}\n",
            cert.cert.display(),
            cert.key.display()
        ),
    )
    .expect("write kubeconfig");
    let config = dir.join("admission.yaml");
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    \
             kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )
    .expect("write admission config");
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_caller_with_a_client_certificate_gets_the_webhook() {
    let dir = testkit::temp_dir("mosc-guard-client-auth-").expect("temp dir");
    // The CA the guard trusts for callers, and the certificate the API server presents.
    let callers = Pki::new(&dir.path().join("callers")).expect("caller CA");
    let apiserver_cert = callers
        .client_cert("kube-apiserver-webhook-client", &[])
        .expect("API server's client certificate");
    // Someone else's CA: a certificate it signed must not get in.
    let strangers = Pki::new(&dir.path().join("strangers")).expect("other CA");
    let stranger_cert = strangers.client_cert("attacker", &[]).expect("cert");
    let port = testkit::net::free_port().expect("free port");
    let metrics_port = testkit::net::free_port().expect("free port");
    let metrics_url = format!("https://127.0.0.1:{metrics_port}/metrics");
    let config = admission_config(dir.path(), port, &apiserver_cert);

    let cp = ControlPlane::start_with_admission_config(&config)
        .await
        .expect("control plane");
    let ca_arg = callers.ca_path().display().to_string();
    let guard = BIN
        .serve(&cp)
        .port(port)
        .metrics_port(metrics_port)
        .args(&["--client-ca-file", &ca_arg])
        // Its debug line about a refusal it writes no Event for is the sign checked below.
        .env("RUST_LOG", "info,mosc_guard=debug")
        .start()
        .await
        .expect("guard starts (its --metrics-listen /readyz needs no client certificate)");
    register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");

    // The API server presents its certificate: the deletion is decided by the guard (a MOSC
    // that never built guards nothing, so it is allowed after the fresh read).
    testkit::scenario::create_mosc(&cp.client(), "infra", "registry.example.com/ocb:latest")
        .await
        .expect("MOSC infra");
    let out = cp
        .kubectl(["delete", "machineosconfig", "infra"])
        .await
        .expect("kubectl");
    assert!(out.success(), "the API server's call succeeds: {out:?}");
    let metrics = client(guard.ca_pem(), None)
        .get(&metrics_url)
        .send()
        .await
        .expect("metrics without a client certificate")
        .text()
        .await
        .expect("metrics body");
    assert!(
        metrics.contains(
            "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"allowed\"} 1"
        ),
        "the guard decided the API server's call:\n{metrics}"
    );

    let validate = guard.validate_url();
    // No certificate, or one from another CA: the handshake fails, before any decision (no
    // read, no Event).
    for (cert, who) in [
        (None, "a caller without a certificate"),
        (Some(&stranger_cert), "a stranger's certificate"),
    ] {
        let err = client(guard.ca_pem(), cert)
            .post(&validate)
            .json(&review("worker"))
            .send()
            .await;
        assert!(err.is_err(), "{who} fails the handshake: {err:?}");
    }
    // A certificate from the configured CA: answered.
    let resp = client(guard.ca_pem(), Some(&apiserver_cert))
        .post(&validate)
        .json(&review("worker"))
        .send()
        .await
        .expect("request with the caller CA's certificate");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("review");
    assert_eq!(
        body["response"]["uid"],
        "7d1f7c0e-0000-4000-8000-000000000001"
    );

    // Only the API server's and the last call were decided.
    let metrics = client(guard.ca_pem(), None)
        .get(&metrics_url)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    assert!(
        metrics.contains("mosc_guard_admission_decision_duration_seconds_count 2"),
        "{metrics}"
    );

    // Events: a refusal about an object the guard does not have (a forged review with a name
    // of the caller's choosing) writes none. A node really needs image X; the forged review
    // deletes a made-up build of X, so the guard refuses it.
    let image = format!("registry.example.com/ocb@sha256:{}", "ab".repeat(32));
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-1",
        "annotations": {
            "machineconfiguration.openshift.io/desiredImage": image,
            "machineconfiguration.openshift.io/state": "Working"
        }
    }})
    .to_string();
    let out = cp
        .kubectl_with_stdin(["apply", "-f", "-"], Some(&node))
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    let forged = |name: &str| {
        let old = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
                         "metadata": {"name": name, "uid": "forged",
                             "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
                         "status": {"digestedImagePushSpec": image}});
        Review::delete(MACHINE_OS_BUILD, old)
            .uid("7d1f7c0e-0000-4000-8000-000000000002")
            .user("attacker")
            .json()
    };
    let trusted = client(guard.ca_pem(), Some(&apiserver_cert));
    // The node cache may need a moment to see node-1: repeat (bounded) until refused.
    let mut refused = false;
    for _ in 0..50 {
        let resp = trusted
            .post(&validate)
            .json(&forged("attacker-chose-this-name"))
            .send()
            .await
            .expect("forged review");
        let body: Value = resp.json().await.expect("review");
        if body["response"]["allowed"] == false {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        refused,
        "the forged deletion of a build node-1 needs is refused"
    );
    // The refusal reached the Event step and skipped it: the guard says so at debug (an
    // Event it writes logs no such line); then no Event names the object.
    guard
        .wait_log_line(
            &[
                "no Event: the guard does not know this object",
                "name=attacker-chose-this-name",
            ],
            std::time::Duration::from_secs(30),
        )
        .await
        .expect("the refusal skipped the Event");
    let out = cp
        .kubectl(["get", "events.events.k8s.io", "-n", "default", "-o", "json"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    assert!(
        !out.stdout.contains("attacker-chose-this-name"),
        "no Event about an object the guard does not know:\n{}",
        out.stdout
    );
    guard.stop();
}
