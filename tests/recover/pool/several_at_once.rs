//! A pool that updates two nodes at once (`maxUnavailable: 2`), healed as MCO heals it. After the
//! cancel the daemon asks for its uncordon and looks again only 10 s later; the drain controller
//! uncordons the node after 5 s; any event of the pool in between (here another node finishing
//! its update, as in a pool rolling several nodes) queues a pool sync 5 s later, which finds the
//! node schedulable but still Degraded: unavailable, yet a candidate, and with capacity left MCO
//! sends it the pool's target before its daemon reports Done (from the copy it read before the
//! wait, so Done follows all the same). That new target is exactly what MCO's node controller
//! writes, on an uncordoned node: MCO moving on, not someone's edit, and `recover --apply --wait`
//! goes on and ends with the pool Updated (exit 0).
//!
//! The cluster is set up at the fast timing; the way back plays MCO's own delays
//! (`Simulator::play_mco_node_delays`: drain controller 5 s, pool sync 5 s, the daemon's 10 s
//! look, its queue from 1 s to 60 s). The window's order is held rather than timed
//! (`Simulator::hold_before_done`): the degraded node, uncordoned, reports Done only once MCO
//! sent it the target and `recover` saw it; another node's Done is the pool's event between.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::*;
use testkit::mco::{
    self, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, LAST_APPLIED_DRAIN, STATE, STATE_DEGRADED,
    STATE_DONE, STATE_WORKING, is_unschedulable, node_annotation, uncordon_request,
};

/// The pool's next rendered config (a MachineConfig change: every node reboots into it).
const R2: &str = "rendered-worker-2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e";

async fn set_max_unavailable(cluster: &Cluster, max: u32) {
    mco::mcps(&cluster.client)
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxUnavailable": max}})),
        )
        .await
        .expect("maxUnavailable");
}

/// Waits until `node`'s annotations satisfy `ok` (and it is schedulable when `schedulable`).
async fn wait_node(
    cluster: &Cluster,
    node: &str,
    schedulable: Option<bool>,
    ok: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
    timeout: Duration,
    what: &str,
) {
    let client = &cluster.client;
    let ok = &ok;
    wait_for(
        || async move {
            let n = mco::nodes(client).get(node).await?;
            let a = n.metadata.annotations.clone().unwrap_or_default();
            let cordon = schedulable.is_none_or(|s| s != is_unschedulable(&n));
            Ok((cordon && ok(&a)).then_some(()))
        },
        timeout,
        &format!("{node}: {what}"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_at_once_mco_moving_a_degraded_node_on_is_a_recovery() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let [n0, n1, n2] = [0, 1, 2].map(|i| cluster.nodes[i].clone());
    let r1 = rendered_config("worker");
    let first = layered_and_settled(&cluster).await;
    set_max_unavailable(&cluster, 2).await;

    // A config change rolled out two at a time: n0 caught mid-update, the others reach it.
    cluster.sim.hold(&n0);
    render(&cluster, R2).await;
    let second = wait_new_build(&cluster, &first.image).await;
    for node in [&n1, &n2] {
        let image = second.image.clone();
        wait_node(
            &cluster,
            node,
            None,
            move |a| a.get(CURRENT_IMAGE) == Some(&image),
            STEP_TIMEOUT,
            "on the new image",
        )
        .await;
    }
    let image = second.image.clone();
    wait_node(
        &cluster,
        &n0,
        None,
        move |a| {
            a.get(STATE).map(String::as_str) == Some(STATE_WORKING)
                && a.get(DESIRED_IMAGE) == Some(&image)
        },
        STEP_TIMEOUT,
        "Working toward the new image",
    )
    .await;

    // The bug: the MachineOSConfig deleted, both images with it; n0, released, fails.
    // n2 will end its revert (the pool leaves image mode) uncordoned but not Done yet.
    cluster.sim.hold_before_done(&n2);
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
    wait_image_and_builds_of_gone(&cluster, "worker", &second.image_ref().expect("image")).await;
    cluster.sim.release(&n0);
    wait_node(
        &cluster,
        &n0,
        Some(false),
        |a| a.get(STATE).map(String::as_str) == Some(STATE_DEGRADED),
        STEP_TIMEOUT,
        "Degraded and cordoned",
    )
    .await;
    wait_node(
        &cluster,
        &n1,
        None,
        |a| a.get(STATE).map(String::as_str) == Some(STATE_DONE) && !a.contains_key(CURRENT_IMAGE),
        STEP_TIMEOUT,
        "reverted",
    )
    .await;
    let uncordon_r2 = uncordon_request(R2);
    wait_node(
        &cluster,
        &n2,
        Some(true),
        move |a| {
            a.get(STATE).map(String::as_str) == Some(STATE_WORKING)
                && a.get(LAST_APPLIED_DRAIN) == Some(&uncordon_r2)
        },
        STEP_TIMEOUT,
        "reverted, uncordoned, before Done",
    )
    .await;

    // The way back at MCO's pace. n0's daemon, once uncordoned, waits before it reports Done
    // (as when its next look comes after the pool's sync): the order the window needs, without
    // timing it against the machine's speed.
    cluster.sim.play_mco_node_delays();
    cluster.sim.hold_before_done(&n0);
    let running = start_recover(
        &cluster,
        &["--apply", "--wait", "--timeout", "5m", "-o", "json"],
    );
    // n0's daemon asks for its uncordon once its queue lets it (up to 60 s for a node that
    // failed this long); the drain controller applies it 5 s later.
    let uncordon_r1 = uncordon_request(&r1);
    wait_node(
        &cluster,
        &n0,
        Some(true),
        move |a| a.get(LAST_APPLIED_DRAIN) == Some(&uncordon_r1),
        Duration::from_secs(150),
        "uncordoned, before Done",
    )
    .await;
    // n2 reports Done: the pool's sync 5 s later finds n0 schedulable but still Degraded.
    cluster.sim.release_before_done(&n2);
    wait_node(
        &cluster,
        &n0,
        Some(true),
        |a| {
            a.get(STATE).map(String::as_str) == Some(STATE_DEGRADED)
                && a.get(DESIRED_CONFIG).map(String::as_str) == Some(R2)
                && !a.contains_key(DESIRED_IMAGE)
        },
        STEP_TIMEOUT,
        "sent the pool's target while still Degraded",
    )
    .await;
    // recover reads the node every second: it sees the new target before the daemon's Done.
    running
        .wait_for_stderr("before the daemon reported Done", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    cluster.sim.release_before_done(&n0);

    let run = running.finish().await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    let applied = &report["applied"][0];
    assert_eq!(applied["node"], n0.as_str(), "{report:#}");
    assert_eq!(applied["outcome"], "movedOn", "{report:#}");
    assert!(
        applied["why"]
            .as_str()
            .is_some_and(|w| w.contains("before the daemon reported Done")),
        "{applied:#}"
    );
    assert_eq!(report["pools"][0]["outcome"], "updated", "{report:#}");
    wait_pool_reverted(&cluster).await;
    assert_pool_healthy(&cluster, "worker").await;
    let n = mco::nodes(&cluster.client).get(&n0).await.expect("node");
    assert_eq!(node_annotation(&n, DESIRED_CONFIG), Some(R2));
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "recovered in a pool of two at once in {:.2?}",
        started.elapsed()
    );
}
