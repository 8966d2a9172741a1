//! Real requests beside a flood: reviews over new connections and GETs over an established
//! HTTP/2 connection, timed; what a run measured and what it must show.

use super::flood::{Flood, FloodCounts, count};
use super::*;

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

/// A flood beside real requests: `stalled` connections, each connecting once or reconnecting
/// when closed, and `reviews` real reviews `pause` apart, each expected to be `allowed`.
pub(super) struct Plan {
    pub(super) stalled: usize,
    pub(super) reconnect: bool,
    pub(super) reviews: usize,
    pub(super) pause: Duration,
    pub(super) allowed: bool,
    /// Connecting once: after the reviews, wait for the server to close every connection it
    /// kept, and count the guard's open files before the flood and after.
    pub(super) closes: Option<Deadline>,
}

/// The server's first-request deadline, and its process (for its open files).
pub(super) struct Deadline {
    pub(super) first_request: Duration,
    pub(super) guard_pid: u32,
}

/// How the server closed the connections it kept (connecting once).
struct Closes {
    first_request: Duration,
    /// Connections that finished TLS and were still open at the deadline.
    left_open: usize,
    /// The longest the server held one after its handshake.
    held_max: Duration,
    /// The guard's open files before the flood and after every stalled connection was
    /// closed (the established connection open both times).
    guard_files: (usize, usize),
}

/// A deadline's slack: the server starts it at accept, before the client's handshake ends, but
/// the client's runtime may notice the close late.
const MARGIN: Duration = Duration::from_secs(3);

/// The open file descriptors of process `pid` (each connection is one).
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

impl Closes {
    /// Waits out the deadline of every connection `flood` has open against the guard.
    async fn wait(flood: &Flood, deadline: &Deadline, files_before: usize) -> Self {
        let left_open = flood.wait_all_closed(deadline.first_request + MARGIN).await;
        // The reviews' own connections close a moment after their clients drop them.
        let mut files_after = open_files(deadline.guard_pid);
        for _ in 0..40 {
            if files_after <= files_before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            files_after = open_files(deadline.guard_pid);
        }
        let held_ms = flood
            .counts
            .held_max_ms
            .load(std::sync::atomic::Ordering::SeqCst);
        Self {
            first_request: deadline.first_request,
            left_open,
            held_max: Duration::from_millis(held_ms),
            guard_files: (files_before, files_after),
        }
    }
}

/// What a flood run measured.
pub(super) struct FloodRun {
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
    closes: Option<Closes>,
}

impl FloodRun {
    /// Prints the figures (RELIABILITY.md's `stalled:` lines).
    pub(super) fn print(&self, server: &str) {
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
        if let Some(c) = &self.closes {
            println!(
                "stalled: {server}, after the reviews: every connection kept closed by the server \
                 within {:.2} s of its handshake (deadline {:?}), {} left open; the guard's open \
                 files {} before the flood, {} after",
                c.held_max.as_secs_f64(),
                c.first_request,
                c.left_open,
                c.guard_files.0,
                c.guard_files.1,
            );
        }
    }

    /// What every run must show, whatever the timings: every review answered (asserted as it
    /// ran), the connection that carried a request never closed, stalled connections closed
    /// to make room, and no other stream cap announced to the HTTP/2 ones. With the closes
    /// waited for: every connection closed by its deadline, and none of its file descriptors
    /// left in the guard.
    pub(super) fn assert_held_up(&self) {
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
        if let Some(c) = &self.closes {
            assert_eq!(c.left_open, 0, "connections left open past their deadline");
            assert!(
                c.held_max <= c.first_request + MARGIN,
                "a stalled connection was held {:?} after its handshake, deadline {:?}",
                c.held_max,
                c.first_request
            );
            assert!(
                c.guard_files.1 <= c.guard_files.0,
                "the guard holds no more files than before the flood: {:?}",
                c.guard_files
            );
        }
    }
}

/// Floods `url` as `plan` says and, once the server holds as many as it keeps without requests
/// (the rest still arriving, or reconnecting), sends the real reviews, each over a new
/// connection, and a GET over an established HTTP/2 connection after each.
pub(super) async fn flood_beside_real_requests(url: &str, ca_pem: &[u8], plan: &Plan) -> FloodRun {
    let &Plan {
        stalled,
        reconnect,
        reviews,
        pause,
        allowed,
        ..
    } = plan;
    let mut established = Established::open(url, ca_pem).await;
    let files_before = plan.closes.as_ref().map(|d| open_files(d.guard_pid));
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
    let closes = match (&plan.closes, files_before) {
        (Some(deadline), Some(before)) if !reconnect => {
            Some(Closes::wait(&flood, deadline, before).await)
        }
        _ => None,
    };
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
        closes,
    }
}
