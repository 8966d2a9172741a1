//! A deletion deferred until the rollout settles, the foreground cascade, and the mutating webhook's one finalizer.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_is_deferred_until_the_rollout_settles() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let image = rollout.build.image_ref().expect("image reference");
    assert!(
        finalizers(&mosc(&cluster, "worker").await.expect("worker"))
            .contains(&FINALIZER.to_string()),
        "the mutating webhook added the finalizer on create"
    );
    // The cache has seen the rolling node, so the warning names it.
    wait_index_holds_the_rolling_node(&guard).await;

    // Step 4 of the report: the delete returns at once with the warning.
    delete_deferred(&cluster, &rollout, &[]).await;
    assert_held(&cluster).await;

    // Stripping the finalizer by hand (a common runbook step for a stuck object) would complete
    // the deletion now: it is decided as the deletion, and refused.
    let out = kubectl(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "worker",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
        ],
    )
    .await;
    assert!(!out.success(), "{out:?}");
    for want in [
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        "This update removes the finalizer mosc-guard.dev/wait-for-rollout",
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?} in {}",
            out.stderr
        );
    }
    assert_held(&cluster).await;
    let event = wait_event(&cluster, "worker", "DeletionDeferred").await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains(&rollout.node),
        "the Event names the node: {note}"
    );
    let CliRun { code, stdout, .. } = cluster.check(&BIN, "machineosconfig/worker", &[]);
    assert_eq!(code, Some(1), "check still says unsafe: {stdout}");

    // While the node is held nothing is released, the image stays and the builds stay. Each
    // pass of the controller over the held deletion confirms the refusal with a fresh read:
    // two more passes than now, so the first of them has finished (its Event, if it wrote
    // one, is written) before anything is checked.
    let confirmed = "mosc_guard_confirmations_total{result=\"refusal-confirmed\"}";
    let passes = guard.counter(confirmed).await.expect("metrics");
    guard
        .wait_counter_above(confirmed, passes + 1.0, STEP_TIMEOUT)
        .await
        .expect("the controller looked at the held deletion again, twice");
    assert_held(&cluster).await;
    assert_image_in_registry(&cluster, &image).await;
    assert_eq!(
        events(&cluster, "worker", "DeletionDeferred").await.len(),
        1,
        "one Event per set of blocking nodes, not one per requeue"
    );
    let metrics = guard.metrics().await.expect("metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l == "mosc_guard_deferred_deletions 1"),
        "{metrics}"
    );
    // The oldest deferred deletion's deletionTimestamp, which the alert ages.
    let since = mosc(&cluster, "worker")
        .await
        .and_then(|m| m.metadata.deletion_timestamp)
        .expect("deletionTimestamp")
        .0
        .as_second();
    let want = format!("mosc_guard_oldest_deferred_deletion_timestamp_seconds {since}");
    assert!(
        metrics.lines().any(|l| l == want),
        "missing {want:?} in\n{metrics}"
    );

    // MCO keeps rolling (it ignores deletionTimestamp). The next node is caught mid-update too:
    // the set of blocking nodes changed, so a new Event names it (an Event keyed without its
    // note would only recount the first one, still naming the first node).
    let second = cluster.nodes[1].clone();
    cluster.sim.hold(&second);
    cluster.sim.release(&rollout.node);
    // A blocking node is listed as "<node> (pool worker, state ...)"; the pool's line may name
    // the second node earlier as one MCO updates next.
    let blocks = |node: &str| format!("{node} (pool worker");
    let renamed = wait_for(
        || async {
            Ok(events(&cluster, "worker", "DeletionDeferred")
                .await
                .into_iter()
                .find(|e| {
                    e.note
                        .as_deref()
                        .unwrap_or_default()
                        .contains(&blocks(&second))
                }))
        },
        STEP_TIMEOUT,
        "a DeletionDeferred Event naming the second node as blocking",
    )
    .await
    .expect("Event for the new set of blocking nodes");
    let note = renamed.note.unwrap_or_default();
    assert!(
        !note.contains(&blocks(&rollout.node)),
        "the first node is no longer blocking: {note}"
    );
    assert_held(&cluster).await;

    // The finalizer goes once every node is on the image and the pool stops Updating; then MCO
    // deletes images and builds and reverts the pool.
    cluster.sim.release(&second);
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_event(&cluster, "worker", "DeletionReleased").await;
    wait_image_and_builds_gone(&cluster, &image).await;
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");

    let metrics = guard.metrics().await.expect("metrics");
    for want in [
        "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"deferred\"} 1",
        "mosc_guard_finalizer_releases_total{reason=\"settled\"} 1",
        "mosc_guard_deferred_deletion_duration_seconds_count 1",
        "mosc_guard_mutations_total{result=\"added\"}",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
    for want in [
        "mosc_guard_leader 1",
        "mosc_guard_deferred_deletions 0",
        "mosc_guard_oldest_deferred_deletion_timestamp_seconds 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == want),
            "missing {want:?} in\n{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_cascade_waits_for_the_builds_then_the_whole_tree_goes() {
    // Builds take seconds (as real ones take minutes), so the garbage collector finishes the
    // foreground deletion before MCO has rebuilt a deleted MachineOSBuild.
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    delete_deferred(&cluster, &rollout, &["--cascade=foreground"]).await;

    // The garbage collector's MOSB deletes are refused while the node needs the image.
    wait_for(
        || async {
            let text = guard.metrics().await?;
            Ok(text
                .contains("mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"denied\"}")
                .then_some(()))
        },
        STEP_TIMEOUT,
        "the garbage collector's MachineOSBuild delete to be denied",
    )
    .await
    .expect("MOSB delete denied");
    let builds = testkit::scenario::mosbs_of(&cluster.client, "worker")
        .await
        .expect("list builds");
    assert!(
        builds
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some(rollout.build.mosb.as_str())),
        "the build is still there"
    );
    assert_held(&cluster).await;

    cluster.sim.release(&rollout.node);
    wait_mosc_gone(&cluster.client, "worker").await;
    wait_for(
        || async {
            let builds = testkit::scenario::mosbs_of(&cluster.client, "worker").await?;
            Ok(builds.is_empty().then_some(()))
        },
        STEP_TIMEOUT,
        "the MachineOSBuilds to be gone",
    )
    .await
    .expect("builds deleted");
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");
    // Whether MCO deleted the image depends on whether it saw the MOSC still there when it
    // handled the build's deletion (4.20's in-use check then keeps the image every node runs,
    // a leak) or already gone (no check): both are 4.20 behaviour, and both are safe here
    // because every node had reached the image before the build could go.
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutating_webhook_adds_one_finalizer_and_restores_it() {
    let cluster = seed(SimConfig::real_timing()).await;
    // A pool without nodes: the simulator builds, but no node ever needs the image.
    create_pool(&cluster.client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("create pool infra");
    let guard = defer_guard(&cluster, &[]).await;
    register_webhooks(&cluster.cp, &guard, true)
        .await
        .expect("webhooks registered");
    let manifest = serde_json::to_string(&json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": "infra", "finalizers": ["example.com/keep"]},
        "spec": {
            "machineConfigPool": {"name": "infra"},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": cluster.push_spec(),
            "containerFile": [{"containerfileArch": "NoArch", "content": "FROM configs AS final\n"}]
        }
    }))
    .expect("json");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mosc.json");
    std::fs::write(&file, &manifest).expect("write manifest");
    let file = file.to_string_lossy().into_owned();
    for _ in 0..2 {
        let out = kubectl(&cluster, ["apply", "-f", &file]).await;
        assert!(out.success(), "{out:?}");
    }
    let obj = mosc(&cluster, "infra").await.expect("infra");
    assert_eq!(
        finalizers(&obj),
        vec!["example.com/keep".to_string(), FINALIZER.to_string()],
        "applied twice: our finalizer once, the other one kept"
    );

    // Removing it by hand from a live object: the webhook puts it back in the same request.
    let both = format!(r#"["example.com/keep","{FINALIZER}"]"#);
    let after = finalizers_after(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "infra",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/1"}]"#,
        ],
    )
    .await;
    assert_eq!(after, both);

    // A write that leaves the finalizer alone is let through untouched. The test makes this write
    // itself: the simulator's own annotation lands only when the build ends, which on a slow
    // machine is after the deletion below.
    let after = finalizers_after(
        &cluster,
        [
            "annotate",
            "machineosconfig",
            "infra",
            "example.com/touched=yes",
        ],
    )
    .await;
    assert_eq!(after, both);

    // An object being deleted is left alone: clearing its finalizers is not undone.
    mco::moscs(&cluster.client)
        .delete("infra", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let after = finalizers_after(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "infra",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    )
    .await;
    assert!(
        !after.contains(FINALIZER),
        "not re-added while terminating: {after:?}"
    );
    wait_mosc_gone(&cluster.client, "infra").await;
    let metrics = guard.metrics().await.expect("metrics");
    for want in [
        "mosc_guard_mutations_total{result=\"added\"}",
        "mosc_guard_mutations_total{result=\"present\"}",
        "mosc_guard_mutations_total{result=\"terminating\"}",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
}
