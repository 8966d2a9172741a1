//! Cases (a) and (b): kube-apiserver killed and restarted on the same port; etcd killed and
//! restarted on the same data directory.

use super::*;

/// Cases (a) and (b): a control-plane process dies mid-rollout and comes back.
async fn control_plane_restart(which: &str) {
    let (cluster, watch) = layered_cluster().await;
    let (setup, guard) = guarded_rollout(cluster, watch, None).await;
    let cluster = &setup.cluster;
    let (worker, infra) = (mosc(cluster, "worker").await, mosc(cluster, "infra").await);
    let pid = guard.pid();
    let failed_before = failed_confirmations(&guard.metrics().await.expect("metrics"));

    let down = outage();
    match which {
        "apiserver" => cluster.cp.kill_apiserver(),
        _ => cluster.cp.kill_etcd(),
    }
    let killed = Instant::now();
    // Straight away and once the caches had time to go stale: refused either way.
    let mut during = assert_direct_reviews_fail_closed(&guard, &worker, &infra).await;
    if which == "etcd" {
        // The API server is up: an admin's deletion through it must not go through either.
        let through = dry_run_delete(&cluster.client, "infra").await;
        assert!(
            through.is_err(),
            "a deletion was admitted while etcd was down"
        );
        during.push(format!(
            "through the API server: {}",
            first_line(&through.unwrap_err())
        ));
    }
    let mut unready: Option<(String, Vec<String>)> = None;
    while killed.elapsed() < down {
        if unready.is_none() {
            // Metrics first, as in guard_cut_off: staleness only grows during the outage.
            let metrics = guard.metrics().await.unwrap_or_default();
            if let Some((503, body)) = guard.readyz().await {
                unready = Some((body, stale_caches(&metrics)));
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    during.extend(assert_direct_reviews_fail_closed(&guard, &worker, &infra).await);
    let metrics = guard.metrics().await.expect("metrics");
    let failed_during = failed_confirmations(&metrics) - failed_before;
    let ready_gauge = metric(&metrics, "mosc_guard_ready");
    assert!(
        failed_during >= 1.0,
        "the unconfirmable allows are counted: {metrics}"
    );

    let back_in = match which {
        "apiserver" => cluster.cp.start_apiserver_again().await,
        _ => cluster.cp.start_etcd_again().await,
    }
    .expect("control plane back");
    let (_, recovered) = wait_readyz(&guard, 200, Duration::from_secs(120)).await;
    assert_eq!(guard.pid(), pid, "the same process recovered");
    let metrics = guard.metrics().await.expect("metrics");
    assert_eq!(stale_caches(&metrics), Vec::<String>::new());
    assert_eq!(metric(&metrics, "mosc_guard_ready"), Some(1.0));
    // The next answers are correct again (retrying while the watches and the API server's own
    // caches catch up: a refusal saying "could not verify" right after the restart is fine).
    wait_for(
        || async { Ok(dry_run_delete(&cluster.client, "infra").await.ok()) },
        STEP_TIMEOUT,
        "infra's deletion to be allowed again",
    )
    .await
    .expect("allows resume");
    assert_decides_correctly(&setup).await;
    let allowed_after = finish(&setup).await;
    let (readyz_during, stale_during) = unready
        .map(|(b, s)| (format!("503 {:?}", first_line(&b.replace('\n', " "))), s))
        .unwrap_or_else(|| ("200 throughout".to_owned(), Vec::new()));
    println!(
        "chaos {which}-restart: down {:.1}s, back in {back_in:.1?}; during: /readyz {readyz_during}, \
         stale caches {stale_during:?}, mosc_guard_ready at the end of the outage {ready_gauge:?}, \
         confirmations failed +{failed_during}, refusals {during:?}; guard ready again {recovered:.1?} \
         after the {which} served, same pid {pid}; the settled deletion allowed {allowed_after:.1?} \
         after the rollout settled; no pool degraded",
        down.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_killed_mid_rollout() {
    control_plane_restart("apiserver").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarted_mid_rollout() {
    control_plane_restart("etcd").await;
}
