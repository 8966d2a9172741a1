//! One stalled connection: it finishes TLS, sends nothing or only the HTTP/2 preface, and
//! reads until the server closes it.

use super::*;

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

/// How one stalled connection went: when its TLS handshake finished (`None`: it did not), when
/// the server closed it, and the stream cap its SETTINGS announced (HTTP/2 preface connections
/// only).
pub(super) struct Stalled {
    pub(super) handshake_done: Option<std::time::Instant>,
    pub(super) closed: std::time::Instant,
    pub(super) max_streams: Option<u32>,
}

/// Connects, finishes TLS, sends only the HTTP/2 preface (`h2`) or nothing, and reads until
/// the server closes the connection.
pub(super) async fn stall(
    addr: &str,
    connector: &tokio_rustls::TlsConnector,
    h2: bool,
    handshakes: &std::sync::atomic::AtomicUsize,
) -> Stalled {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let not_served = || Stalled {
        handshake_done: None,
        closed: std::time::Instant::now(),
        max_streams: None,
    };
    // Under a flood a connect can fail (the accept queue is full): it was not served.
    let Ok(tcp) = tokio::net::TcpStream::connect(addr).await else {
        return not_served();
    };
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    // The server may close a connection during its handshake (its deadline, or room for a
    // newer one).
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return not_served();
    };
    let handshake_done = std::time::Instant::now();
    handshakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // The server may already have closed it: that is a close too.
    if h2 && tls.write_all(H2_PREFACE).await.is_err() {
        return Stalled {
            handshake_done: Some(handshake_done),
            closed: std::time::Instant::now(),
            max_streams: None,
        };
    }
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded by the caller's timeout or abort; each read either returns data or the close.
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
