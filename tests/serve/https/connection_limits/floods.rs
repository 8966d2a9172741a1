//! Floods of stalled connections beside real requests: against the in-process server (connecting
//! once, reconnecting) and against the `mosc-guard serve` binary (`make stalled`).

use super::real_requests::{Deadline, Plan, flood_beside_real_requests};
use super::*;

/// The in-process server with a first-request deadline (and HTTP/1 header timeout) of 60 s,
/// longer than the flood's 40 s to get in place plus the reviews' 10 s bound: only closing
/// stalled connections for new ones makes room (without it, the stalled connections held
/// their places until their deadline and no review was answered).
async fn flood_the_in_process_server(stalled: usize, reconnect: bool) {
    listener::raise_open_files_limit();
    let s = setup_deny(Limits {
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
    let plan = Plan {
        stalled,
        reconnect,
        reviews: 5,
        pause: Duration::from_millis(100),
        allowed: false,
        closes: None,
    };
    let run = flood_beside_real_requests(&s.server.url, ca.as_bytes(), &plan).await;
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
/// (within the 10 s first-request deadline), then every connection the server kept closed by
/// its deadline, none of their file descriptors left in the guard; then as many reconnecting
/// as soon as they are closed, reviews for `MOSC_GUARD_STALLED_SECONDS` (20). RELIABILITY.md
/// has the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "thousands of connections for half a minute: make soak runs it"]
async fn thousands_of_stalled_connections_against_the_serve_binary() {
    let stalled = testkit::env_number("MOSC_GUARD_STALLED", 5000);
    let seconds = testkit::env_number("MOSC_GUARD_STALLED_SECONDS", 20);
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
        let plan = Plan {
            stalled,
            reconnect,
            reviews,
            pause,
            allowed: true,
            closes: (!reconnect).then(|| Deadline {
                first_request: ConnectionLimits::default().first_request,
                guard_pid: guard.pid(),
            }),
        };
        let run = flood_beside_real_requests(&guard.base_url(), ca.as_bytes(), &plan).await;
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
