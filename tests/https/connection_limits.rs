//! Connection limits: a client that never finishes its headers, connections that send nothing
//! (closed at their deadline, or sooner when a new connection needs the room), floods of them
//! beside real reviews and an established connection, an idle HTTP/2 connection.

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
    setup_with_limits(Limits {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        header_read_timeout: Duration::from_millis(500),
        connection,
    })
    .await
}

async fn setup_with_limits(limits: Limits) -> Setup {
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
    let server = start_with_limits(files, view, DeletionMode::Deny, limits).await;
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

/// How one stalled connection went: when its TLS handshake finished (`None`: it did not), when
/// the server closed it, and the stream cap its SETTINGS announced (HTTP/2 preface connections
/// only).
struct Stalled {
    handshake_done: Option<std::time::Instant>,
    closed: std::time::Instant,
    max_streams: Option<u32>,
}

/// Connects, finishes TLS, sends only the HTTP/2 preface (`h2`) or nothing, and reads until
/// the server closes the connection.
async fn stall(
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

/// A flood of connections that finish TLS and then send nothing (even ones) or only the HTTP/2
/// preface (odd ones). With `reconnect`, each one the server closes connects again until the
/// flood stops, so connections keep arriving the whole time; without, each connects once. It
/// runs on a runtime of its own, on its own thread, as another process would: the test's real
/// client is not queued behind the flood's tasks (only the machine's cores are shared).
struct Flood {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    counts: Arc<FloodCounts>,
}

#[derive(Debug, Default)]
struct FloodCounts {
    /// TLS handshakes finished.
    handshakes: std::sync::atomic::AtomicUsize,
    /// Connections the server closed after their handshake (to make room, or at the
    /// first-request deadline).
    closed: std::sync::atomic::AtomicUsize,
    /// Connections that failed to connect or were closed during their handshake.
    not_served: std::sync::atomic::AtomicUsize,
    /// HTTP/2 preface connections whose SETTINGS announced the expected stream cap, and ones
    /// that announced another.
    h2_cap_announced: std::sync::atomic::AtomicUsize,
    h2_cap_wrong: std::sync::atomic::AtomicUsize,
}

fn count(counter: &std::sync::atomic::AtomicUsize) -> usize {
    counter.load(std::sync::atomic::Ordering::SeqCst)
}

impl Flood {
    fn start(
        addr: &str,
        ca_pem: &[u8],
        connections: usize,
        reconnect: bool,
        expected_streams: u32,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (idle_tls, preface) = (
            tls_connector(ca_pem, b"http/1.1"),
            tls_connector(ca_pem, b"h2"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(FloodCounts::default());
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let (addr, flag, tally) = (addr.to_string(), Arc::clone(&stop), Arc::clone(&counts));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("the flood's runtime");
            runtime.block_on(async move {
                let mut tasks = tokio::task::JoinSet::new();
                for i in 0..connections {
                    let h2 = i % 2 == 1;
                    let connector = if h2 {
                        preface.clone()
                    } else {
                        idle_tls.clone()
                    };
                    let (addr, stop, counts) =
                        (addr.clone(), Arc::clone(&flag), Arc::clone(&tally));
                    tasks.spawn(async move {
                        while !stop.load(Ordering::SeqCst) {
                            let o = stall(&addr, &connector, h2, &counts.handshakes).await;
                            if o.handshake_done.is_none() {
                                counts.not_served.fetch_add(1, Ordering::SeqCst);
                                // Do not spin on a refused connect.
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            } else {
                                counts.closed.fetch_add(1, Ordering::SeqCst);
                                match o.max_streams {
                                    Some(n) if n == expected_streams => {
                                        counts.h2_cap_announced.fetch_add(1, Ordering::SeqCst);
                                    }
                                    Some(_) => {
                                        counts.h2_cap_wrong.fetch_add(1, Ordering::SeqCst);
                                    }
                                    None => {}
                                }
                            }
                            if !reconnect {
                                break;
                            }
                        }
                    });
                }
                // Until stopped; then every connection is dropped from this side.
                let _ = finished.await;
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
            });
        });
        Self {
            thread: Some(thread),
            stop,
            done: Some(done),
            counts,
        }
    }

    /// Waits until `n` handshakes have finished, or `within` passed.
    async fn wait_handshakes(&self, n: usize, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        while count(&self.counts.handshakes) < n {
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Waits until each of the `n` connections has finished its handshake or failed, or
    /// `within` passed.
    async fn wait_all_tried(&self, n: usize, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        while count(&self.counts.handshakes) + count(&self.counts.not_served) < n {
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Stops the flood: its connections are dropped from this side.
    async fn stop(mut self) -> Arc<FloodCounts> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(thread) = self.thread.take() {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .expect("joined")
                .expect("the flood's thread ended cleanly");
        }
        Arc::clone(&self.counts)
    }
}

/// An HTTP/2 connection that has made a request (as the API server's pooled connection has),
/// and whether it has been closed since.
struct Established {
    sender: hyper::client::conn::http2::SendRequest<axum::body::Body>,
    closed: Arc<std::sync::atomic::AtomicBool>,
    url: String,
}

impl Established {
    async fn open(url: &str, ca_pem: &[u8]) -> Self {
        let connector = tls_connector(ca_pem, b"h2");
        let addr = url.trim_start_matches("https://");
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
        let tls = connector.connect(name, tcp).await.expect("handshake");
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        )
        .await
        .expect("HTTP/2 handshake");
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&closed);
        tokio::spawn(async move {
            let _ = conn.await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut established = Self {
            sender,
            closed,
            url: url.to_string(),
        };
        established.healthz().await;
        established
    }

    /// GET /healthz on this connection; how long it took.
    async fn healthz(&mut self) -> Duration {
        let started = std::time::Instant::now();
        let request = hyper::Request::get(format!("{}/healthz", self.url))
            .body(axum::body::Body::empty())
            .expect("request");
        let response = tokio::time::timeout(Duration::from_secs(10), async {
            self.sender.ready().await?;
            self.sender.send_request(request).await
        })
        .await
        .expect("answered within 10 s on the established connection")
        .expect("the established connection is still open");
        assert_eq!(response.status(), 200);
        started.elapsed()
    }

    fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A deletion review of MOSC worker over a new connection (a new client), as the API server
/// sends it on a connection it has just opened; how long the answer took, connecting included.
async fn review_over_a_new_connection(url: &str, ca_pem: &[u8], allowed: bool) -> Duration {
    let http = client(ca_pem, None);
    let started = std::time::Instant::now();
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        http.post(format!("{url}/validate"))
            .json(&review(
                "DELETE",
                "machineosconfigs",
                mosc("worker", None),
                false,
            ))
            .send(),
    )
    .await;
    let took = started.elapsed();
    let resp = answered
        .expect("answered within 10 s although connections stall")
        .expect("request");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("review");
    assert_eq!(body["response"]["allowed"], allowed, "{body}");
    took
}

/// Latencies as "p50 X ms, max Y ms".
fn summary(mut took: Vec<Duration>) -> String {
    took.sort();
    let at = |p: f64| {
        let i = ((took.len() as f64 - 1.0) * p).round() as usize;
        took.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    format!(
        "{} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        took.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

/// What a flood run measured.
struct FloodRun {
    stalled: usize,
    reconnect: bool,
    /// From the flood's start until every stalled connection had its turn (connecting once)
    /// or the server held all it keeps (reconnecting): what a client arriving in the middle
    /// of the burst may wait.
    flooded_in: Duration,
    /// Stalled connections' handshakes per second while the reviews ran.
    handshake_rate: f64,
    new_connection: Vec<Duration>,
    established: Vec<Duration>,
    counts: Arc<FloodCounts>,
    established_kept: bool,
}

impl FloodRun {
    /// Prints the figures (RELIABILITY.md's `stalled:` lines).
    fn print(&self, server: &str) {
        let c = &self.counts;
        println!(
            "stalled: {server}, {} connections sending nothing after TLS (half only the HTTP/2 \
             preface), {}: {} handshakes, {} closed by the server, {} not served; flood in \
             place after {:.1} s, then {:.0} stalled handshakes/s; real reviews over a new \
             connection: {}; GET over an established HTTP/2 connection: {}; established \
             connection kept open: {}",
            self.stalled,
            if self.reconnect {
                "each reconnecting when closed"
            } else {
                "each connecting once"
            },
            count(&c.handshakes),
            count(&c.closed),
            count(&c.not_served),
            self.flooded_in.as_secs_f64(),
            self.handshake_rate,
            summary(self.new_connection.clone()),
            summary(self.established.clone()),
            if self.established_kept { "yes" } else { "NO" },
        );
    }

    /// What every run must show, whatever the timings: every review answered (asserted as it
    /// ran), the connection that carried a request never closed, stalled connections closed
    /// to make room, and no other stream cap announced to the HTTP/2 ones.
    fn assert_held_up(&self) {
        assert!(
            self.established_kept,
            "the established connection was closed during the flood"
        );
        // Those the server does not keep are closed (a few perhaps in their handshake).
        let closed = count(&self.counts.closed) + count(&self.counts.not_served);
        assert!(
            closed >= self.stalled.saturating_sub(listener::MAX_UNPROVEN),
            "the server closed stalled connections to make room: {:?}",
            self.counts
        );
        // (Whether they read the SETTINGS before the close depends on timing; the deadline
        // test checks that each gets them.)
        assert_eq!(count(&self.counts.h2_cap_wrong), 0);
    }
}

/// Floods `url` with `stalled` connections and, once the server holds as many as it keeps
/// without requests (the rest still arriving, or reconnecting), sends `reviews` real reviews,
/// each over a new connection, and a GET over an established HTTP/2 connection after each,
/// `pause` apart.
async fn flood_beside_real_requests(
    url: &str,
    ca_pem: &[u8],
    stalled: usize,
    reconnect: bool,
    reviews: usize,
    pause: Duration,
    allowed: bool,
) -> FloodRun {
    let mut established = Established::open(url, ca_pem).await;
    let addr = url.trim_start_matches("https://");
    let h2_max_streams = ConnectionLimits::default().h2_max_streams;
    let started = std::time::Instant::now();
    let flood = Flood::start(addr, ca_pem, stalled, reconnect, h2_max_streams);
    // Connecting once: every stalled connection has had its turn (the server keeps what it
    // can and has closed the rest). Reconnecting: the server keeps all it can, and the rest
    // keep coming.
    if reconnect {
        let busy = flood
            .wait_handshakes(
                stalled.min(listener::MAX_UNPROVEN),
                Duration::from_secs(120),
            )
            .await;
        assert!(busy, "the flood got going: {:?}", flood.counts);
    } else if !flood.wait_all_tried(stalled, Duration::from_secs(40)).await {
        // Then the reviews below wait behind the rest and are not answered in time.
        println!(
            "stalled: not every stalled connection had its turn within 40 s: {:?}",
            flood.counts
        );
    }
    let flooded_in = started.elapsed();
    let handshakes_before = count(&flood.counts.handshakes);
    let reviewing = std::time::Instant::now();
    let mut new_connection = Vec::new();
    let mut over_established = Vec::new();
    for _ in 0..reviews {
        new_connection.push(review_over_a_new_connection(url, ca_pem, allowed).await);
        over_established.push(established.healthz().await);
        tokio::time::sleep(pause).await;
    }
    let handshake_rate = (count(&flood.counts.handshakes) - handshakes_before) as f64
        / reviewing.elapsed().as_secs_f64();
    let established_kept = !established.closed();
    let counts = flood.stop().await;
    // Still the same connection, and it still answers.
    if established_kept {
        established.healthz().await;
    }
    FloodRun {
        stalled,
        reconnect,
        flooded_in,
        handshake_rate,
        new_connection,
        established: over_established,
        counts,
        established_kept: established_kept && !established.closed(),
    }
}

/// The in-process server with a first-request deadline (and HTTP/1 header timeout) of 60 s,
/// longer than the flood's 40 s to get in place plus the reviews' 10 s bound: only closing
/// stalled connections for new ones makes room (without it, the stalled connections held
/// their places until their deadline and no review was answered).
async fn flood_the_in_process_server(stalled: usize, reconnect: bool) {
    listener::raise_open_files_limit();
    let s = setup_with_limits(Limits {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(5),
        header_read_timeout: Duration::from_secs(60),
        connection: ConnectionLimits {
            first_request: Duration::from_secs(60),
            idle: Duration::from_secs(120),
            ..ConnectionLimits::default()
        },
    })
    .await;
    let ca = s.pki.ca_pem();
    let run = flood_beside_real_requests(
        &s.server.url,
        ca.as_bytes(),
        stalled,
        reconnect,
        5,
        Duration::from_millis(100),
        false,
    )
    .await;
    run.print("in-process server (debug build)");
    run.assert_held_up();
}

/// 600 connections that finish TLS and then send nothing or only the HTTP/2 preface, more
/// than the server keeps: real reviews over new connections are still answered, and an
/// established HTTP/2 connection that made a request is never closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hundred_stalled_connections_do_not_stop_a_real_request() {
    flood_the_in_process_server(600, false).await;
}

/// A flood that keeps closing: 300 stalled connections (more than the server keeps), each
/// reconnecting as soon as it is closed. A new connection is safe while its handshake runs,
/// so the real client's is not closed by the newcomers behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_that_reconnect_do_not_stop_a_real_request() {
    flood_the_in_process_server(listener::MAX_UNPROVEN + 44, true).await;
}

/// The same against the real `mosc-guard serve` process (release build under `make soak`;
/// allow-all: `--from-dir` over an empty directory) with its default limits: first
/// `MOSC_GUARD_STALLED` connections (5,000) each connecting once, reviews every 250 ms for 5 s
/// (within the 10 s first-request deadline); then as many reconnecting as soon as they are
/// closed, reviews for `MOSC_GUARD_STALLED_SECONDS` (20). RELIABILITY.md has the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "thousands of connections for half a minute: make soak runs it"]
async fn thousands_of_stalled_connections_against_the_serve_binary() {
    let stalled = env_usize("MOSC_GUARD_STALLED", 5000);
    let seconds = env_usize("MOSC_GUARD_STALLED_SECONDS", 20);
    let open_files = listener::raise_open_files_limit().unwrap_or(0);
    assert!(
        open_files >= stalled as u64 + 256,
        "the flood needs {stalled} files open at once beside the test's own; the hard limit \
         allows {open_files} (raise it with `ulimit -Hn`, or set MOSC_GUARD_STALLED lower)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path()).expect("pki");
    let empty = tempfile::tempdir().expect("tempdir");
    let empty = empty.path().to_string_lossy().to_string();
    let guard = testkit::guard::GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"))
        .serve_offline(&pki)
        .args(&["--from-dir", &empty])
        .start()
        .await
        .expect("mosc-guard serve");
    let rss_before = rss_mib(guard.pid());
    let pause = Duration::from_millis(250);
    let ca = pki.ca_pem();
    for (reconnect, reviews) in [(false, 20), (true, (seconds * 4).max(1))] {
        let run = flood_beside_real_requests(
            &guard.base_url(),
            ca.as_bytes(),
            stalled,
            reconnect,
            reviews,
            pause,
            true,
        )
        .await;
        run.print("mosc-guard serve");
        guard.check_running().expect("the guard is still running");
        run.assert_held_up();
    }
    println!(
        "stalled: guard RSS before {rss_before:.1} MiB, peak {:.1} MiB, after {:.1} MiB",
        peak_rss_mib(guard.pid()),
        rss_mib(guard.pid()),
    );
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
}

/// A field of /proc/PID/status, in MiB.
fn status_mib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

fn peak_rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmHWM:")
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
