//! The report's scenario on a real control plane, registry and the MCO 4.20 simulator:
//! create a MOSC for the worker pool, wait for the build and the first node to start updating,
//! delete the MOSC. Without mosc-guard the pool degrades with "manifest unknown".
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`: delete events handled 5 s late, builds of seconds).
//!
//! Each test starts its own control plane (a few seconds) and drops it at the end.

mod support;

use std::time::Duration;

use support::mco::{DESIRED_IMAGE, REASON, STATE, STATE_DEGRADED};
use support::scenario::{node_annotation, node_annotations, wait_for};
use support::simulator::SimConfig;
use support::steps::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unguarded_deletion_degrades_pool() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::real_timing()).await;
    let client = &cluster.client;

    // Steps 1-3: MOSC created, build succeeded, first node mid-update to the new image (held).
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let image = rollout.build.image_ref().expect("digested image reference");
    let digest = image.digest.clone().expect("image has a digest");

    // Step 4: delete the MOSC at once. Nothing stops it.
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(
        out.success(),
        "kubectl delete machineosconfig failed: {}",
        out.stderr
    );

    // MCO 4.20 deletes every image of the MOSC's builds, in use or not, and the builds.
    wait_image_and_builds_gone(&cluster, &image).await;

    // The node mid-update keeps desiredImage = the deleted image; its daemon now fails to pull it.
    assert_eq!(
        node_annotation(client, &rollout.node, DESIRED_IMAGE)
            .await
            .expect("read node"),
        Some(rollout.build.image.clone()),
        "a node mid-update keeps its desiredImage in 4.20"
    );
    cluster.sim.release(&rollout.node);

    let degraded = wait_node_degraded(&cluster).await;
    assert_eq!(
        degraded.reason,
        "1 nodes are reporting degraded status on sync"
    );
    assert!(
        degraded.message.contains("manifest unknown"),
        "{degraded:?}"
    );

    let annotations = node_annotations(client, &rollout.node)
        .await
        .expect("read node");
    assert_eq!(
        annotations.get(STATE).map(String::as_str),
        Some(STATE_DEGRADED)
    );
    let reason = annotations.get(REASON).cloned().unwrap_or_default();
    assert!(reason.contains("manifest unknown"), "reason: {reason}");
    assert!(
        reason.starts_with(&format!(
            "error running rpm-ostree rebase --experimental ostree-unverified-registry:{}",
            rollout.build.image
        )),
        "reason: {reason}"
    );
    assert!(
        reason.contains(&format!(
            "reading manifest {digest} in {}",
            image.repository()
        )),
        "reason: {reason}"
    );

    // The other workers were never told to use the image and stay on the base OS.
    for node in &cluster.nodes[1..] {
        assert_eq!(
            node_annotation(client, node, DESIRED_IMAGE)
                .await
                .expect("read node"),
            None,
            "{node}"
        );
    }
    // As an admin sees it.
    let out = cluster
        .cp
        .kubectl([
            "get",
            "mcp",
            "worker",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="NodeDegraded")].status} {.status.degradedMachineCount}"#,
        ])
        .await
        .expect("run kubectl get mcp");
    assert_eq!(
        out.stdout.trim(),
        "True 1",
        "kubectl get mcp: {}",
        out.stderr
    );
    kubectl(&cluster, ["get", "mcp,machineosconfigs,machineosbuilds"]).await;
    eprintln!(
        "unguarded_deletion_degrades_pool took {:.2?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// With mosc-guard: the same steps, as an admin would run them, and `mosc-guard check` asked the
// same question at every step.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_deletion_is_denied_until_rollout_completes() {
    let g = guarded(SimConfig::real_timing(), &[]).await;
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
    let metrics = guard_metrics(&g.guard).await.expect("metrics");
    assert!(
        metrics.contains("mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"denied\"} 1")
            && !metrics.contains("mosc_guard_confirmations_total"),
        "denied from the cache and its index, without a confirming read:\n{metrics}"
    );
    let (code, stdout, stderr) = check(cluster, "machineosconfig/worker", &[]);
    assert_eq!(code, 1, "check agrees with the webhook: {stdout}{stderr}");
    assert!(stdout.contains(&rollout.node), "{stdout}");
    assert_image_in_registry(cluster, &image).await;

    // The rollout finishes; the same command now goes through.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let (code, stdout, stderr) = check(cluster, "mosc/worker", &["--output", "json"]);
    assert_eq!(
        code, 0,
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
async fn override_annotation_allows_the_deletion_with_a_warning() {
    let g = guarded(SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let out = kubectl(
        cluster,
        [
            "annotate",
            "machineosconfig",
            "worker",
            "mosc-guard.dev/allow-deletion=node is being replaced",
        ],
    )
    .await;
    assert!(out.success(), "{out:?}");
    let (code, stdout, stderr) = check(cluster, "worker", &["--output", "json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json report");
    assert_eq!(report["overridden"], true, "{report}");
    assert_eq!(
        report["blockingNodes"][0]["node"],
        rollout.node.as_str(),
        "{report}"
    );

    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "override lets the delete through: {out:?}");
    assert!(
        out.stderr.contains("Warning: mosc-guard:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("node is being replaced"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&rollout.node), "{}", out.stderr);

    // What the override risked: MCO deletes the image (its builds' deletions stay refused, the
    // override covers only the config), then the node never gets it. Released only once the
    // image is gone, as in the report, so a slow MCO pass cannot let the node pull it first.
    let image = rollout.build.image_ref().expect("image reference");
    let digest = image.digest.clone().expect("digest");
    wait_for(
        || async {
            let gone = cluster
                .registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            Ok(gone.then_some(()))
        },
        STEP_TIMEOUT,
        "MCO to delete the image",
    )
    .await
    .expect("image deleted");
    cluster.sim.release(&rollout.node);
    let degraded = wait_node_degraded(cluster).await;
    assert!(
        degraded.message.contains("manifest unknown"),
        "{degraded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_deletion_of_the_build_mid_rollout_is_denied() {
    let g = guarded(SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let out = kubectl(cluster, ["delete", "machineosbuild", &rollout.build.mosb]).await;
    assert!(!out.success(), "{out:?}");
    let head = format!(
        "machineosbuild \"{}\" cannot be deleted yet: 1 node still needs its image.",
        rollout.build.mosb
    );
    assert!(out.stderr.contains(&head), "{}", out.stderr);
    assert!(out.stderr.contains(&rollout.node), "{}", out.stderr);
    let (code, stdout, _) = check(cluster, &format!("mosb/{}", rollout.build.mosb), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.starts_with(&head), "{stdout}");
    let builds = support::scenario::mosbs_of(&cluster.client, "worker")
        .await
        .expect("list");
    assert_eq!(builds.len(), 1, "the build is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_dry_run_is_denied_without_side_effects() {
    let g = guarded(SimConfig::real_timing(), &[]).await;
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
        support::scenario::mosbs_of(&cluster.client, "worker")
            .await
            .expect("list")
            .len(),
        1
    );
    let (code, _, _) = check(cluster, "worker", &[]);
    assert_eq!(code, 1);

    // The dry run left no Event; the real refusal that follows records exactly one (the
    // recorder would count a second identical one as a series).
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
            Ok((!found.is_empty()).then_some(found))
        },
        STEP_TIMEOUT,
        "a DeletionBlocked Event about worker",
    )
    .await
    .expect("Event recorded for the real refusal");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let blocked_now = events_about(
        &cluster.client,
        "MachineOSConfig",
        "worker",
        "DeletionBlocked",
    )
    .await;
    assert_eq!(blocked_now.len(), 1, "{blocked_now:?}");
    assert!(
        blocked_now[0].series.is_none(),
        "one refusal, not two: {blocked_now:?}"
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
    let g = guarded(SimConfig::real_timing(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let (code, _, _) = check(cluster, "worker", &[]);
    assert_eq!(code, 0, "settled: deleting would be safe now");

    // A node outside the pool (not rolled by the simulator's pool controller) is told to move
    // to the image, and the delete follows within the same millisecond-scale window.
    let extra = "ip-10-0-99-1.us-east-2.compute.internal";
    support::scenario::create_nodes(
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
        &support::mco::mosc_resource(),
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
            check(cluster, "worker", &[]).0,
            0,
            "round {round}: safe again"
        );
        wait_for(
            || async {
                let text = guard_metrics(&g.guard).await?;
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
    let metrics = guard_metrics(&g.guard).await.expect("metrics");
    eprintln!(
        "confirmations: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("mosc_guard_confirmations_total"))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_guard_down_failure_policy_fail_refuses_the_delete() {
    let mut g = guarded(SimConfig::real_timing(), &[]).await;
    g.guard.stop();
    let out = kubectl(&g.cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr
            .contains("failed calling webhook \"deletions.mosc-guard.dev\""),
        "the API server's own error: {}",
        out.stderr
    );
    let out = kubectl(
        &g.cluster,
        ["get", "machineosconfig", "worker", "-o", "name"],
    )
    .await;
    assert!(out.success(), "the MOSC still exists: {out:?}");
    let (code, _, _) = check(&g.cluster, "worker", &[]);
    assert_eq!(code, 1, "check still sees the danger without the webhook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_use_policy_blocks_a_settled_pool_until_overridden() {
    let g = guarded(SimConfig::real_timing(), &["--policy", "in-use"]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr
            .contains("3 nodes still need or run an image built from it (policy in-use)"),
        "{}",
        out.stderr
    );
    assert_eq!(check(cluster, "worker", &["--policy", "in-use"]).0, 1);
    assert_eq!(
        check(cluster, "worker", &[]).0,
        0,
        "in-flight would allow it"
    );
    kubectl(
        cluster,
        [
            "annotate",
            "machineosconfig",
            "worker",
            "mosc-guard.dev/allow-deletion=leaving image mode",
        ],
    )
    .await;
    let out = kubectl(cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
}
