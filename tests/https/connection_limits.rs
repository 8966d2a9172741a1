//! Connection limits: a client that never finishes its headers, hundreds of stalled
//! connections, an idle HTTP/2 connection.

use super::*;

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
