//! Each slow client is closed at its deadline: headers never finished, nothing (or only the
//! HTTP/2 preface) sent after TLS, an HTTP/2 connection left idle.

use super::stall::stall;
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

/// A few connections that send nothing (or only the HTTP/2 preface) are closed at the
/// first-request deadline even when no newer connection needs their slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_nothing_are_closed_at_their_deadline() {
    const STALLED: usize = 20;
    let limits = stall_limits();
    let s = setup_limited(limits).await;
    let addr = s.server.url.trim_start_matches("https://").to_string();
    let ca = s.pki.ca_pem();
    let (h1, h2) = (
        tls_connector(ca.as_bytes(), b"http/1.1"),
        tls_connector(ca.as_bytes(), b"h2"),
    );
    let mut stalled = tokio::task::JoinSet::new();
    for i in 0..STALLED {
        let connector = if i % 2 == 0 { h1.clone() } else { h2.clone() };
        let addr = addr.clone();
        stalled.spawn(async move {
            let handshakes = std::sync::atomic::AtomicUsize::new(0);
            stall(&addr, &connector, i % 2 == 1, &handshakes).await
        });
    }
    let outcomes = tokio::time::timeout(Duration::from_secs(30), stalled.join_all())
        .await
        .expect("every stalled connection was closed by the server");
    let margin = Duration::from_secs(3);
    let mut h2_settings = 0;
    for o in &outcomes {
        let done = o.handshake_done.expect("a few connections all finish TLS");
        let held = o.closed.duration_since(done);
        assert!(
            held <= limits.first_request + margin,
            "a stalled connection was held {held:?}, deadline {:?}",
            limits.first_request
        );
        if let Some(streams) = o.max_streams {
            assert_eq!(
                streams, limits.h2_max_streams,
                "HTTP/2 stream cap announced"
            );
            h2_settings += 1;
        }
    }
    assert_eq!(
        h2_settings,
        STALLED / 2,
        "every HTTP/2 preface connection got the server's SETTINGS"
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

/// One `GET path` on a raw HTTP/1.1 connection; its status line, or why there is none.
async fn http1_get(
    conn: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    path: &str,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    conn.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(end) = head_end {
            let head = String::from_utf8_lossy(&got[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return Ok(head.lines().next().unwrap_or_default().to_string());
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut chunk))
            .await
            .map_err(|_| "no answer within 5 s".to_string())?
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err(format!("closed after {} bytes", got.len()));
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

/// A kept-alive HTTP/1.1 connection that idles longer than the header-read timeout, but well
/// inside the idle limit, still serves the next request on it. The head deadline starts with a
/// head's first byte: hyper's own timer started as it waited for the next request, so it also
/// counted the idle time, closed the connection and reset a request sent at that moment (a
/// probe's `GET /metrics` after 10 s of quiet, at 50,000 nodes).
#[tokio::test]
async fn a_kept_alive_http1_connection_idle_past_the_header_timeout_still_serves() {
    let s = setup().await;
    let mut conn = raw_tls(&s.server.url, s.pki.ca_pem().as_bytes()).await;
    for round in 0..3 {
        let status = http1_get(&mut conn, "/healthz").await;
        assert_eq!(
            status.as_deref(),
            Ok("HTTP/1.1 200 OK"),
            "round {round} on one connection"
        );
        // Three times the header-read timeout (500 ms), far inside the idle limit (120 s).
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}

/// A head started on a kept-alive connection and never finished is still cut at the head
/// deadline, not at the idle limit.
#[tokio::test]
async fn a_head_started_after_a_request_and_never_finished_is_cut() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = setup().await;
    let mut conn = raw_tls(&s.server.url, s.pki.ca_pem().as_bytes()).await;
    assert_eq!(
        http1_get(&mut conn, "/healthz").await.as_deref(),
        Ok("HTTP/1.1 200 OK")
    );
    conn.write_all(b"POST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .expect("partial headers");
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "closed at the head deadline (500 ms)");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not at once"
    );
}

/// A partial head pipelined behind a complete request (in the same write, so it reaches the
/// server while that request runs, when no head is timed) is not served forever: the idle limit
/// closes the connection at the latest (the bound `head`'s module doc states).
#[tokio::test]
async fn a_partial_head_pipelined_behind_a_request_is_closed_by_the_idle_limit_at_the_latest() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let idle = Duration::from_secs(2);
    let s = setup_limited(ConnectionLimits {
        idle,
        ..ConnectionLimits::default()
    })
    .await;
    let mut conn = raw_tls(&s.server.url, s.pki.ca_pem().as_bytes()).await;
    conn.write_all(
        b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\nPOST /validate HTTP/1.1\r\nhost: 127.0.0.1\r\n",
    )
    .await
    .expect("a request and half of the next");
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(idle * 4, conn.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "still open {:?} after the write: the idle limit ({idle:?}) did not close it",
        started.elapsed()
    );
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.starts_with("HTTP/1.1 200 OK"),
        "the first request was served: {text}"
    );
}
