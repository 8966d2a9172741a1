//! The guard's refusals: until the rollout completes, of the build mid-rollout, as a server-side dry run, and a desired image set just before the delete.

use super::*;

// ---------------------------------------------------------------------------------------------
// With mosc-guard: the same steps, as an admin would run them, and `mosc-guard check` asked the
// same question at every step.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_deletion_is_denied_until_rollout_completes() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let image = rollout.build.image_ref().expect("image reference");

    // The guard's node index has seen the rolling node (the only node with an image yet), so
    // the denial below comes from the cache, not from the confirming read.
    wait_index_holds_the_rolling_node(&g.guard).await;

    // Step 4 of the report, now refused with a message naming the node and the image.
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "premature delete must fail: {out:?}");
    for want in [
        "admission webhook \"deletions.mosc-guard.dev\" denied the request",
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        &format!(
            "{} (pool worker, state Working): desired {}, current <none>",
            rollout.node,
            short_image(rollout)
        ),
        "Wait until `oc get mcp worker` shows UPDATED=True",
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?} in {}",
            out.stderr
        );
    }
    let metrics = g.guard.metrics().await.expect("metrics");
    assert!(
        metrics.contains("mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"denied\"} 1")
            && metrics.contains("mosc_guard_confirmations_total{result=\"refusal-confirmed\"} 1"),
        "denied from the cache, the refusal confirmed by a fresh read:\n{metrics}"
    );
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.check(&BIN, "machineosconfig/worker", &[]);
    assert_eq!(
        code,
        Some(1),
        "check agrees with the webhook: {stdout}{stderr}"
    );
    assert!(stdout.contains(&rollout.node), "{stdout}");
    assert_image_in_registry(cluster, &image).await;

    // The rollout finishes; the same command now goes through.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.check(&BIN, "mosc/worker", &["--output", "json"]);
    assert_eq!(
        code,
        Some(0),
        "check agrees the deletion is safe now: {stdout}{stderr}"
    );
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "delete after the rollout: {out:?}");

    // MCO then deletes the image and the builds, and reverts the pool; nobody needed the image.
    wait_image_and_builds_gone(cluster, &image).await;
    wait_pool_reverted(cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_deletion_of_the_build_mid_rollout_is_denied() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let out = kubectl(cluster, ["delete", "machineosbuild", &rollout.build.mosb]).await;
    assert!(!out.success(), "{out:?}");
    let head = format!(
        "machineosbuild \"{}\" cannot be deleted yet: 1 node still needs its image.",
        rollout.build.mosb
    );
    assert!(out.stderr.contains(&head), "{}", out.stderr);
    assert!(out.stderr.contains(&rollout.node), "{}", out.stderr);
    let CliRun { code, stdout, .. } =
        cluster.check(&BIN, &format!("mosb/{}", rollout.build.mosb), &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.starts_with(&head), "{stdout}");
    let builds = testkit::scenario::mosbs_of(&cluster.client, "worker")
        .await
        .expect("list");
    assert_eq!(builds.len(), 1, "the build is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_dry_run_is_denied_without_side_effects() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let image = rollout.build.image_ref().expect("image reference");
    let out = kubectl(
        cluster,
        ["delete", "machineosconfig", "worker", "--dry-run=server"],
    )
    .await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr.contains("cannot be deleted yet"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&rollout.node), "{}", out.stderr);
    let out = kubectl(cluster, ["get", "machineosconfig", "worker", "-o", "name"]).await;
    assert_eq!(
        out.stdout.trim(),
        "machineosconfig.machineconfiguration.openshift.io/worker"
    );
    assert_image_in_registry(cluster, &image).await;
    assert_eq!(
        testkit::scenario::mosbs_of(&cluster.client, "worker")
            .await
            .expect("list")
            .len(),
        1
    );
    let CliRun { code, .. } = cluster.check(&BIN, "worker", &[]);
    assert_eq!(code, Some(1));

    // The dry run left no Event; the real refusal that follows records exactly one (the
    // recorder would count a second identical one as a series). Waited for: the Event of the
    // real refusal itself (its eventTime after that delete began). An Event of the dry run,
    // written seconds before, would be a second Event, or the only one, too old, with the real
    // refusal counted up as its series (then none this new appears).
    let real_delete = k8s_openapi::jiff::Timestamp::now();
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    let blocked = wait_for(
        || async {
            let found = events_about(
                &cluster.client,
                "MachineOSConfig",
                "worker",
                "DeletionBlocked",
            )
            .await;
            let of_the_real_refusal = found
                .iter()
                .any(|e| e.event_time.as_ref().is_some_and(|t| t.0 >= real_delete));
            Ok(of_the_real_refusal.then_some(found))
        },
        STEP_TIMEOUT,
        "the DeletionBlocked Event of the real refusal",
    )
    .await
    .expect("Event recorded for the real refusal");
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert!(
        blocked[0].series.is_none(),
        "one refusal, not two: {blocked:?}"
    );
    assert_eq!(blocked[0].type_.as_deref(), Some("Warning"));
    assert!(
        blocked[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(&rollout.node),
        "{blocked:?}"
    );

    // One log line per decision, with the verdict, the blocking node count and the latency.
    let log = g.guard.log_tail(200);
    let decisions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("admission decision") && l.contains("name=worker"))
        .collect();
    assert_eq!(decisions.len(), 2, "{log}");
    for (line, dry_run) in decisions.iter().zip(["dry_run=true", "dry_run=false"]) {
        for want in [dry_run, "result=denied", "blocking_nodes=1", "latency_ms="] {
            assert!(line.contains(want), "missing {want} in {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desired_image_set_just_before_the_delete_is_never_a_stale_allow() {
    let g = guarded(&BIN, SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let CliRun { code, .. } = cluster.check(&BIN, "worker", &[]);
    assert_eq!(code, Some(0), "settled: deleting would be safe now");

    // A node outside the pool (not rolled by the simulator's pool controller) is told to move
    // to the image, and the delete follows within the same millisecond-scale window.
    let extra = "ip-10-0-99-1.us-east-2.compute.internal";
    testkit::scenario::create_nodes(
        &cluster.client,
        &[extra.to_string()],
        "node-role.kubernetes.io/infra",
        "rendered-infra-0",
    )
    .await
    .expect("create node");
    cluster.sim.hold(extra);
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client.clone());
    let mosc = kube::Api::<kube::api::DynamicObject>::all_with(
        cluster.client.clone(),
        &testkit::mco::mosc_resource(),
    );
    let annotate = |annotations: serde_json::Value| {
        let nodes = nodes.clone();
        async move {
            let patch = serde_json::json!({"metadata": {"annotations": annotations}});
            nodes
                .patch(
                    extra,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .expect("annotate the extra node");
        }
    };
    for round in 0..5 {
        annotate(serde_json::json!({DESIRED_IMAGE: rollout.build.image, STATE: "Working"})).await;
        let denied = mosc
            .delete("worker", &kube::api::DeleteParams::default())
            .await
            .expect_err("the delete right after the annotation must be denied");
        match denied {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 403, "round {round}: {status:?}");
                assert!(
                    status.message.contains(extra),
                    "round {round}: {}",
                    status.message
                );
            }
            other => panic!("round {round}: unexpected error {other}"),
        }
        annotate(serde_json::json!({DESIRED_IMAGE: null, STATE: "Done"})).await;
        // Let the guard's cache catch up (the extra node leaves its image index; the three
        // workers stay), so the next round's deletion would be allowed from the cache alone.
        assert_eq!(
            cluster.check(&BIN, "worker", &[]).code,
            Some(0),
            "round {round}: safe again"
        );
        wait_for(
            || async {
                let text = g.guard.metrics().await?;
                Ok(text
                    .contains("mosc_guard_cache_objects{cache=\"nodes_with_images\"} 3")
                    .then_some(()))
            },
            STEP_TIMEOUT,
            "the guard's index to drop the extra node",
        )
        .await
        .expect("index caught up");
    }
    let metrics = g.guard.metrics().await.expect("metrics");
    eprintln!(
        "confirmations: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("mosc_guard_confirmations_total"))
            .collect::<Vec<_>>()
            .join("; ")
    );
}
