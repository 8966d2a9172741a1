//! Case (d): defer mode with two replicas, the leader SIGKILLed while a deletion is deferred.

use super::*;

/// Waits until the guard reports (via /metrics) whether it leads.
/// Waits until `guard` exports one deferred deletion whose deletionTimestamp is `since`.
async fn wait_deferred_gauges(guard: &Guard, since: f64, what: &str) {
    wait_for(
        || async {
            let m = guard.metrics().await?;
            Ok((metric(&m, "mosc_guard_deferred_deletions") == Some(1.0)
                && metric(&m, "mosc_guard_oldest_deferred_deletion_timestamp_seconds")
                    == Some(since))
            .then_some(()))
        },
        STEP_TIMEOUT,
        what,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

async fn wait_leader(guard: &Guard, leader: bool, timeout: Duration) -> Duration {
    let started = Instant::now();
    let want = if leader { 1.0 } else { 0.0 };
    wait_for(
        || async {
            let text = guard.metrics().await?;
            Ok((metric(&text, "mosc_guard_leader") == Some(want)).then_some(()))
        },
        timeout,
        &format!("{} to report mosc_guard_leader {want}", guard.base_url()),
    )
    .await
    .expect("leadership as expected");
    started.elapsed()
}

/// Case (d): defer mode, two replicas; the leader dies while a deletion is deferred, and the
/// other replica releases it once the rollout settles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_leader_killed_while_a_deletion_is_deferred() {
    let defer = ["--deletion-mode", "defer", "--lease-namespace", "default"];
    let (cluster, watch) = layered_cluster().await;
    let args = |id: &'static str| -> Vec<&'static str> {
        defer.iter().copied().chain(["--identity", id]).collect()
    };
    let leader = BIN
        .serve(&cluster.cp)
        .args(&args("replica-a"))
        .start()
        .await
        .expect("replica a");
    wait_leader(&leader, true, STEP_TIMEOUT).await;
    let survivor = BIN
        .serve(&cluster.cp)
        .args(&args("replica-b"))
        .start()
        .await
        .expect("replica b");
    // The API server calls replica b; replica a leads and runs the finalizer controller.
    register_validating_webhook(&cluster.cp, &survivor)
        .await
        .expect("validating webhook");
    register_mutating_webhook(&cluster.cp, &survivor)
        .await
        .expect("mutating webhook");
    let setup = rollout(cluster, watch).await;
    let cluster = &setup.cluster;
    let pid = survivor.pid();

    let out = cluster
        .cp
        .kubectl(["delete", "machineosconfig", "worker", "--wait=false"])
        .await
        .expect("kubectl");
    assert!(out.success() && out.stderr.contains("deferred"), "{out:?}");
    let since = mosc(cluster, "worker")
        .await
        .metadata
        .deletion_timestamp
        .expect("Terminating")
        .0
        .as_second() as f64;
    let oldest = "mosc_guard_oldest_deferred_deletion_timestamp_seconds";
    wait_deferred_gauges(
        &leader,
        since,
        "the leader to export the deferred deletion and its deletionTimestamp",
    )
    .await;
    let m = survivor.metrics().await.expect("metrics");
    assert_eq!(metric(&m, "mosc_guard_leader"), Some(0.0));
    assert_eq!(metric(&m, oldest), Some(0.0), "only the leader reports");

    // The leader dies without giving the Lease up, while the deletion is deferred.
    leader.kill();
    let took_over = wait_leader(&survivor, true, Duration::from_secs(60)).await;
    wait_deferred_gauges(
        &survivor,
        since,
        "the new leader to export the same deletionTimestamp",
    )
    .await;
    let held = mosc(cluster, "worker").await;
    assert!(
        held.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER),
        "still held while the node needs the image"
    );

    // The rollout settles; the survivor removes the finalizer, MCO cleans up.
    setup.cluster.sim.release(&setup.rollout.node);
    let released_at = Instant::now();
    wait_mosc_gone(&cluster.client, "worker").await;
    let completed = released_at.elapsed();
    // The guard records the Event once the API server answered its patch: after the object may be gone.
    let released = wait_for_events_about(
        &cluster.client,
        "MachineOSConfig",
        "worker",
        "DeletionReleased",
        STEP_TIMEOUT,
    )
    .await
    .expect("a DeletionReleased Event");
    assert!(
        released
            .iter()
            .any(|e| e.reporting_instance.as_deref() == Some("replica-b")),
        "released by the surviving replica: {released:?}"
    );
    wait_pool_reverted(cluster).await;
    assert!(!setup.watch.ever_degraded(), "pool worker degraded");
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    assert_eq!(survivor.pid(), pid);
    let m = survivor.metrics().await.expect("metrics");
    assert_eq!(metric(&m, "mosc_guard_deferred_deletions"), Some(0.0));
    assert_eq!(metric(&m, oldest), Some(0.0));
    assert_eq!(
        metric(
            &m,
            "mosc_guard_finalizer_releases_total{reason=\"settled\"}"
        ),
        Some(1.0)
    );
    let left = mco::list_all(&mco::moscs(&cluster.client))
        .await
        .expect("list");
    assert!(
        left.iter().all(|m| !m
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
            || m.metadata.deletion_timestamp.is_none()),
        "no deletion left held: {left:?}"
    );
    println!(
        "chaos defer-leader-killed: replica b led {took_over:.1?} after the SIGKILL and exported the \
         same oldest deferred deletionTimestamp ({since}); the deletion completed {completed:.1?} \
         after the node was released, released by replica-b (pid {pid}, never restarted); no pool \
         degraded; mosc_guard_deferred_deletions 0, finalizer releases (settled) 1"
    );
}
