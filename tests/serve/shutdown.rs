//! Shutting the `mosc-guard serve` process down against a real API server: SIGTERM stops it
//! cleanly; for the drain delay after SIGTERM it still answers, with `/readyz` at 503 so the
//! endpoint is removed; and a steady stream of admission requests across a rolling restart
//! fails none.
//!
//! Each test starts its own control plane and guards and stops them.

use std::time::{Duration, Instant};

use testkit::controlplane::ControlPlane;
use testkit::guard::{Guard, GuardBin};
use testkit::mco;
use testkit::probe;
use testkit::review::{CONFIG_MAP, Review};
use testkit::scenario::{create_mosc, dry_run_delete};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_server_cleanly() {
    let cp = ControlPlane::start().await.expect("control plane");
    // The binary's own drain delay (10 s): SIGTERM as the Deployment's pods get it.
    let guard = BIN
        .serve(&cp)
        .keep_shutdown_delay()
        .start()
        .await
        .expect("mosc-guard ready");

    guard.sigterm();
    guard
        .wait_exit(Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("{e} 20 s after SIGTERM\n{}", guard.log()));
    let status = guard.exit_status().expect("exited");
    assert!(status.success(), "exit status {status:?}\n{}", guard.log());
    let log = guard.log();
    assert!(log.contains("shutdown signal received"), "{log}");
    assert!(log.contains("shutting down: no new connections"), "{log}");
    assert_eq!(guard.status("/healthz").await, None, "no longer listening");
}

/// After SIGTERM the guard keeps accepting connections for the drain delay, with /readyz
/// answering 503 so the endpoint is removed, then stops. A request sent 3 s after SIGTERM, on a
/// new connection, still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_a_few_seconds_after_sigterm_is_still_answered() {
    let cp = ControlPlane::start().await.expect("control plane");
    let guard = BIN
        .serve(&cp)
        .args(&["--shutdown-delay", "6"])
        .start()
        .await
        .expect("mosc-guard ready");

    guard.sigterm();
    let signalled = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // New clients: each request goes over a connection opened after SIGTERM.
    let fresh = guard.fresh_client().expect("client");
    let readyz = format!("{}/readyz", guard.base_url());
    assert_eq!(
        probe::get(&fresh, &readyz).await.map(|(status, _)| status),
        Some(503),
        "not ready while draining\n{}",
        guard.log()
    );
    let review = Review::new("DELETE", CONFIG_MAP)
        .uid("after-sigterm")
        .name("x")
        .namespace("default")
        .user("admin")
        .json();
    let fresh = guard.fresh_client().expect("client");
    let resp = fresh
        .post(guard.validate_url())
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

    guard
        .wait_exit(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", guard.log()));
    let status = guard.exit_status().expect("exited");
    assert!(status.success(), "exit status {status:?}\n{}", guard.log());
    let log = guard.log();
    assert!(log.contains("draining: /readyz answers 503"), "{log}");
    assert_eq!(guard.status("/healthz").await, None, "no longer listening");
}

/// How long the endpoints update takes to reach kube-proxy in the model below.
const PROPAGATION: Duration = Duration::from_secs(1);

/// A steady stream of admission requests through the API server across a guard
/// restart fails none.
///
/// What is modelled: the webhook configuration has one URL, the Service's; here it points at a
/// TCP forwarder on 127.0.0.1 standing in for the Service's routing (kube-proxy). Guard A
/// serves; guard B (the new pod of a rolling update, maxSurge 1) starts and becomes Ready; A
/// gets SIGTERM. The test polls A's /readyz every 200 ms, like a readiness probe, and once it
/// is not 200 (or does not answer) it waits [`PROPAGATION`] (the endpoints update reaching
/// kube-proxy) and switches the forwarder's new connections to B, as the endpoints update
/// that removes an unready or terminating endpoint does. Connections already open stay on A,
/// as conntrack keeps them. Meanwhile a client sends server-side dry runs of a
/// MachineOSConfig deletion back to back (each goes through the webhook); every one must get
/// the guard's answer, none "failed calling webhook".
///
/// Where the model differs: a connection to a closed port of a real endpoint is refused
/// (RST to the SYN), which the API server does not retry; the forwarder accepts first and
/// then finds the target closed, so the API server sees a reset, which it retries a few times
/// (500 ms backoff, 5 steps) and can hide. So the test also asserts that no connection routed
/// to A while it was still the endpoint was refused by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_stream_of_reviews_across_a_guard_restart_fails_none() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let cp = ControlPlane::start().await.expect("control plane");
    // Never built: its deletion is allowed after the confirming read.
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");
    let args = ["--shutdown-delay=8", "--lease-namespace=default"];
    let old = BIN.serve(&cp).args(&args).spawn().expect("spawn guard A");
    old.wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("A ready");
    let service = testkit::forwarder::Forwarder::start(old.addr())
        .await
        .expect("forwarder");
    testkit::webhooks::register_validating_webhook_at(
        &cp,
        &service.https_url(),
        &cp.pki().ca_pem(),
    )
    .await
    .expect("webhook registered");
    dry_run_delete(&cp.client(), "worker")
        .await
        .expect("through A");

    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let (cp_client, stop) = (cp.client(), Arc::clone(&stop));
        tokio::spawn(async move {
            let api = mco::moscs(&cp_client);
            let params = kube::api::DeleteParams {
                dry_run: true,
                ..Default::default()
            };
            let (mut answered, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Acquire) {
                match api.delete("worker", &params).await {
                    Ok(_) => answered += 1,
                    Err(e) => failed.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (answered, failed)
        })
    };

    let new = BIN.serve(&cp).args(&args).spawn().expect("spawn guard B");
    new.wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("B ready");
    tokio::time::sleep(Duration::from_secs(1)).await;
    old.sigterm();
    // The endpoints update: new connections go to B once A is not Ready.
    while let Some((200, _)) = old.get("/readyz").await {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(PROPAGATION).await;
    service.set_target(new.addr());
    old.wait_exit(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("A stops: {e}\n{}", old.log_tail(30)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Release);
    let (answered, failed) = stream.await.expect("stream");
    assert_eq!(
        service.refused(),
        0,
        "connections routed to guard A while it was still an endpoint were refused\nA:\n{}",
        old.log_tail(20)
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests failed across the restart, e.g. {:?}\nA:\n{}",
        failed.len(),
        failed.len() as u32 + answered,
        failed.first(),
        old.log_tail(20)
    );
    let decided_by = |g: &Guard| {
        g.log()
            .lines()
            .filter(|l| l.contains("admission decision") && l.contains("name=worker"))
            .count()
    };
    let (by_old, by_new) = (decided_by(&old), decided_by(&new));
    tracing::info!("{answered} answered: {by_old} by A, {by_new} by B");
    assert!(
        by_old > 0 && by_new > 0,
        "A ({by_old}) then B ({by_new}) answered"
    );
    new.wait_status("/readyz", 200, Duration::from_secs(5))
        .await
        .expect("B still ready");
}
