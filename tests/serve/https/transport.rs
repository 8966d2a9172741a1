//! The transport: health, readiness and metrics endpoints, TLS 1.2 and 1.3 over HTTP/1.1 and
//! HTTP/2, the serving certificate rotated by a symlink swap, and a graceful shutdown.

use super::*;

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
