//! The finalizer controller: adoption at start-up, a restart, and two replicas with one leader.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mosc_created_before_the_guard_gets_the_finalizer_at_start_up() {
    let cluster = seed(SimConfig::real_timing()).await;
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("create MOSC");

    // Draining (--no-new-finalizers): the controller leads but adds nothing. Its pass over
    // worker (logged at debug) is the sign it looked before the object is checked.
    let draining = defer_guard_debug(&cluster, &["--no-new-finalizers"]).await;
    wait_leader(&draining, true, STEP_TIMEOUT).await;
    draining
        .wait_log_line(&["nothing to do", "name=worker"], STEP_TIMEOUT)
        .await
        .expect("the draining controller passed over worker");
    let obj = mosc(&cluster, "worker").await.expect("worker");
    assert!(
        finalizers(&obj).is_empty(),
        "--no-new-finalizers adds none: {obj:?}"
    );
    draining.stop();

    // A normal start adopts it without anything touching the object.
    let guard = defer_guard(&cluster, &["--log-format", "json"]).await;
    wait_finalizer(&cluster, "worker").await;
    // It logs the addition once the API server answered the patch, which the test may see first.
    guard
        .wait_log_line(&["added the finalizer", "worker"], STEP_TIMEOUT)
        .await
        .expect("the guard logged the finalizer's addition");

    // --log-format json: every line is one JSON object, with the event's fields.
    let log = guard.log_tail(500);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "added the finalizer"
                && l["fields"]["name"] == "worker"
                && l["level"] == "INFO"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_resumes_and_releases() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    delete_deferred(&cluster, &rollout, &[]).await;
    wait_event(&cluster, "worker", "DeletionDeferred").await;

    // mosc-guard goes away mid-deferral; the rollout completes meanwhile.
    guard.stop();
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    assert_held(&cluster).await;

    // A new process (new port: the webhooks are pointed at it) resumes and releases.
    let guard = defer_guard(&cluster, &[]).await;
    register_webhooks(&cluster.cp, &guard, true)
        .await
        .expect("webhooks registered");
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_one_leads_and_the_other_takes_over() {
    let cluster = seed(SimConfig::real_timing()).await;
    let first = defer_guard(&cluster, &["--identity", "replica-a"]).await;
    wait_leader(&first, true, STEP_TIMEOUT).await;
    let second = defer_guard_debug(&cluster, &["--identity", "replica-b"]).await;
    // The API server calls the second replica; the first only runs the controller.
    register_webhooks(&cluster.cp, &second, true)
        .await
        .expect("webhooks registered");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    // The second replica has read the Lease and found it held by the first (logged at
    // debug): it stays a follower while the first renews.
    second
        .wait_log_line(
            &["another replica holds the lease", "holder=replica-a"],
            STEP_TIMEOUT,
        )
        .await
        .expect("the second replica found the Lease held");
    wait_leader(&second, false, Duration::from_secs(1)).await;
    wait_leader(&first, true, Duration::from_secs(1)).await;

    delete_deferred(&cluster, &rollout, &[]).await;
    wait_event(&cluster, "worker", "DeletionDeferred").await;

    // The leader dies without giving the Lease up; the other replica takes over.
    first.kill();
    let killed = std::time::Instant::now();
    wait_leader(&second, true, Duration::from_secs(30)).await;
    let took = killed.elapsed();
    eprintln!("takeover after {took:.1?}");
    assert!(
        took >= Duration::from_secs(5),
        "a live Lease must not be taken over early ({took:.1?})"
    );
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "default");
    let lease = leases.get("mosc-guard").await.expect("lease");
    let spec = lease.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(spec.lease_transitions, Some(1));

    cluster.sim.release(&rollout.node);
    wait_mosc_gone(&cluster.client, "worker").await;
    let released = wait_event(&cluster, "worker", "DeletionReleased").await;
    assert_eq!(
        released.reporting_instance.as_deref(),
        Some("replica-b"),
        "released by the new leader"
    );
}
