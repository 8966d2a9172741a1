//! Case (c): the guard cut off from the API server, refused or black-holed, for
//! `MOSC_GUARD_CHAOS_OUTAGE_SECS`.

use super::*;

/// How the guard's route to the API server fails in case (c).
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Connections are refused (reset at once).
    Refuse,
    /// Connections are accepted and never answered (packets dropped).
    BlackHole,
}

/// Case (c), refused: the guard's connections to the API server fail at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_refused_by_the_api_server() {
    guard_cut_off(Cut::Refuse).await;
}

/// Case (c), black-holed: the guard's connections to the API server hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_black_holed_from_the_api_server() {
    guard_cut_off(Cut::BlackHole).await;
}

/// Case (c): the guard cannot reach the API server; everything else can.
async fn guard_cut_off(how: Cut) {
    let (cluster, watch) = layered_cluster().await;
    let forwarder = testkit::forwarder::Forwarder::to_apiserver(&cluster.cp)
        .await
        .expect("forwarder");
    let api_server = forwarder.target();
    let kubeconfig =
        testkit::users::admin_kubeconfig_via(&cluster.cp, cluster.cp.dir(), &forwarder.https_url())
            .expect("kubeconfig");
    let (setup, guard) = guarded_rollout(cluster, watch, Some(&kubeconfig)).await;
    let cluster = &setup.cluster;
    let pid = guard.pid();
    let failed_before = failed_confirmations(&guard.metrics().await.expect("metrics"));

    let down = outage();
    match how {
        Cut::BlackHole => forwarder.set_black_hole(true),
        Cut::Refuse => {
            // Port 1 on loopback: nothing listens.
            forwarder.set_target("127.0.0.1:1".parse().expect("address"));
            forwarder.cut_connections();
        }
    }
    let cut = Instant::now();
    // Deletions through the API server meanwhile: worker refused from the cache, infra refused
    // because the confirming read cannot reach the API server.
    let mut during = Vec::new();
    let mut unready: Option<(String, Vec<String>, Duration)> = None;
    // Every watch fails from the cut on, so within --stale-after plus the client's connect
    // timeout (5 s each) every cache must be reported stale.
    let check_at = down.min(Duration::from_secs(15));
    let mut at_check = None;
    let mut attempts = 0;
    while cut.elapsed() < down || attempts == 0 {
        for name in ["worker", "infra"] {
            let answer = dry_run_delete(&cluster.client, name).await;
            let refused = answer.expect_err("no deletion is allowed while the guard is cut off");
            during.push(format!("{name}: {}", first_line(&refused)));
        }
        attempts += 1;
        if unready.is_none() {
            // Metrics first: caches only turn stale during the outage, so every cache the
            // metrics call stale is also stale when /readyz answers a moment later. A cache
            // that turned stale between the two reads is seen on the next pass.
            let metrics = guard.metrics().await.unwrap_or_default();
            let stale = stale_caches(&metrics);
            if let Some((503, body)) = guard.readyz().await
                && !stale.is_empty()
            {
                unready = Some((body, stale, cut.elapsed()));
            }
        }
        if at_check.is_none() && cut.elapsed() >= check_at {
            at_check = Some(readiness_now(&guard, cut).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let at_check = match at_check {
        Some(c) => c,
        None => readiness_now(&guard, cut).await,
    };
    let metrics = guard.metrics().await.expect("metrics");
    let failed_during = failed_confirmations(&metrics) - failed_before;
    let ready_gauge = metric(&metrics, "mosc_guard_ready");
    assert!(failed_during >= 1.0, "{metrics}");
    let (body, stale, unready_after) = unready.unwrap_or_else(|| {
        panic!(
            "/readyz never answered 503 with the metrics naming a stale cache in {down:?} \
             without the API server\n{}",
            guard.log_tail(40)
        )
    });
    assert!(
        stale.iter().all(|c| body.contains(c.as_str())),
        "/readyz names them: {body}"
    );
    let (status_end, body_end, stale_end, checked_after) = at_check;
    let mut all = stale_end.clone();
    all.sort();
    assert_eq!(
        (status_end, all),
        (
            503,
            [
                "machineconfigpools",
                "machineosbuilds",
                "machineosconfigs",
                "nodes"
            ]
            .map(String::from)
            .to_vec()
        ),
        "{checked_after:.0?} without the API server every cache is stale: /readyz {body_end}\n{}",
        guard.log_tail(30)
    );

    match how {
        Cut::BlackHole => forwarder.set_black_hole(false),
        Cut::Refuse => forwarder.set_target(api_server),
    }
    let (_, recovered) = wait_readyz(&guard, 200, Duration::from_secs(120)).await;
    assert_eq!(guard.pid(), pid, "the same process recovered");
    let metrics = guard.metrics().await.expect("metrics");
    assert_eq!(stale_caches(&metrics), Vec::<String>::new());
    assert_eq!(metric(&metrics, "mosc_guard_ready"), Some(1.0));
    assert_decides_correctly(&setup).await;
    let allowed_after = finish(&setup).await;
    let kinds: std::collections::BTreeSet<String> = during
        .iter()
        .map(|d| {
            if d.contains("could not verify") {
                format!("{}: could not verify", &d[..d.find(':').unwrap_or(0)])
            } else if d.contains("cannot be deleted yet") {
                format!("{}: cannot be deleted yet", &d[..d.find(':').unwrap_or(0)])
            } else {
                d.clone()
            }
        })
        .collect();
    println!(
        "chaos guard-cut-off ({how:?}): {:.1}s, {attempts} rounds of deletions refused ({kinds:?}); \
         /readyz 503 after {unready_after:.1?} naming {stale:?} ({:?}), after {checked_after:.0?} {stale_end:?}, \
         mosc_guard_ready {ready_gauge:?}, \
         confirmations failed +{failed_during}; ready again {recovered:.1?} after the route came back, \
         same pid {pid}; the settled deletion allowed {allowed_after:.1?} after the rollout settled; \
         no pool degraded",
        cut.elapsed().as_secs_f64(),
        first_line(&body.replace('\n', " "))
    );
}

/// /readyz status and body, and the stale caches /metrics names, now.
async fn readiness_now(guard: &Guard, since: Instant) -> (u16, String, Vec<String>, Duration) {
    let at = since.elapsed();
    let metrics = guard.metrics().await.unwrap_or_default();
    let (status, body) = guard.readyz().await.unwrap_or_default();
    (status, body, stale_caches(&metrics), at)
}
