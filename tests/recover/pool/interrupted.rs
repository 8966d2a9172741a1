//! A recovery cut short and run again: the stuck node's daemon is held, so after the cancel it
//! does not finish its no-op update. A first `recover --apply` patches the node and stops at its
//! `--timeout`; a second is interrupted (Ctrl-C) while it waits; the daemon is let go and a third
//! ends recovered. The node was patched once: one Event, the marker as the first run wrote it,
//! and the node object unchanged by the runs that followed it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_recovery_run_again_patches_nothing_twice() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    cluster.sim.hold(&stuck.node);

    // 1: patched, then its wait times out.
    let first = recover(&cluster, &["--apply", "--timeout", "5s", "-o", "json"]).await;
    assert_eq!(first.code, Some(1), "{first:?}");
    let report = first.json();
    let applied = &report["applied"][0];
    assert_eq!(
        (&applied["outcome"], &applied["problem"]),
        (&Value::from("stopped"), &Value::from("timedOut")),
        "{report:#}"
    );
    assert_eq!(
        applied["recorded"][testkit::mco::DESIRED_IMAGE],
        stuck.image.as_str()
    );
    assert_eq!(
        report["needsAttention"][0]["problems"],
        serde_json::json!(["timedOut"])
    );
    let node = testkit::mco::nodes(&cluster.client)
        .get(&stuck.node)
        .await
        .expect("node");
    let version = node.metadata.resource_version.clone();
    let marker = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MARKER))
        .cloned();
    assert!(marker.is_some(), "the first run's marker");
    assert_eq!(recovery_events(&cluster, &stuck).await, 1);

    // 2: it recognises the cancelled node and waits, without a patch; Ctrl-C.
    let second = start_recover(&cluster, &["--apply", "-o", "json"]);
    second
        .wait_for_stderr("already cancelled by an earlier run", STEP_TIMEOUT)
        .await
        .expect("the second run recognises the cancel");
    second
        .wait_for_stderr("waiting for its daemon", STEP_TIMEOUT)
        .await
        .expect("the second run waits");
    second.interrupt();
    let second = second.finish().await;
    assert_eq!(second.code, Some(130), "{second:?}");
    let report = second.json();
    assert_eq!(report["applied"][0]["outcome"], "interrupted", "{report:#}");
    assert!(
        second.stderr.contains("run recover --apply again"),
        "{second:?}"
    );
    let node = testkit::mco::nodes(&cluster.client)
        .get(&stuck.node)
        .await
        .expect("node");
    assert_eq!(
        node.metadata.resource_version, version,
        "the second run wrote nothing"
    );

    // The plan between runs lists it as cancelled, waiting for its daemon.
    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(nodes_in(&plan.json(), "cancelled"), [stuck.node.as_str()]);
    assert_eq!(nodes_in(&plan.json(), "recoverable"), Vec::<&str>::new());

    // 3: waits for the cancelled node; the daemon let go, it finishes.
    let third = start_recover(
        &cluster,
        &["--apply", "--wait", "--timeout", "2m", "-o", "json"],
    );
    third
        .wait_for_stderr("already cancelled by an earlier run", STEP_TIMEOUT)
        .await
        .expect("the third run recognises the cancel");
    cluster.sim.release(&stuck.node);
    let third = third.finish().await;
    assert_eq!(third.code, Some(0), "{third:?}");
    let report = third.json();
    let applied = &report["applied"][0];
    assert_eq!(applied["outcome"], "recovered", "{report:#}");
    assert_eq!(
        applied.get("recorded"),
        None,
        "not patched by this run: {report:#}"
    );
    assert_eq!(report["pools"][0]["outcome"], "updated", "{report:#}");
    assert!(!third.stderr.contains("patching"), "{third:?}");

    let annotations = wait_node_back(&cluster, &stuck).await;
    assert_recorded_once(&cluster, &stuck, &annotations).await;
    assert_eq!(
        annotations.get(MARKER),
        marker.as_ref(),
        "the first run's marker"
    );
    assert_pool_healthy(&cluster, "worker").await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "interrupted twice and recovered with one patch in {:.2?}",
        started.elapsed()
    );
}
