//! A stuck node uncordoned by hand (`kubectl uncordon`, what an admin tries first): its daemon
//! would skip the drain of its next update of this config, since `lastAppliedDrain` already
//! says drained, and reboot it with workloads running. `recover` refuses it
//! (`uncordonedByHand`) and writes nothing, not even with `--apply`; cordoned again as the
//! refusal says, it is recovered.

use super::*;
use testkit::mco::{STATE, STATE_DEGRADED};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_uncordoned_by_hand_is_refused_until_cordoned_again() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    let out = kubectl(&cluster, ["uncordon", &stuck.node]).await;
    assert!(out.success(), "{out:?}");

    let cordon = format!("oc adm cordon {}", stuck.node);
    assert_refused(&cluster, &stuck, "uncordonedByHand", &cordon).await;
    let state = node_annotation(&cluster.client, &stuck.node, STATE)
        .await
        .expect("node");
    assert_eq!(state.as_deref(), Some(STATE_DEGRADED), "still stuck");

    // Cordoned again (`oc adm cordon` is `kubectl cordon`): recovered.
    let out = kubectl(&cluster, ["cordon", &stuck.node]).await;
    assert!(out.success(), "{out:?}");
    let (_, report) = apply_and_wait(&cluster).await;
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(report["pools"][0]["outcome"], "updated", "{report:#}");
    let annotations = wait_node_back(&cluster, &stuck).await;
    assert_recorded_once(&cluster, &stuck, &annotations).await;
    assert_pool_healthy(&cluster, "worker").await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!(
        "uncordoned by hand: refused, cordoned, recovered in {:.2?}",
        started.elapsed()
    );
}
