//! Two pools hurt at once (`worker` and a custom pool `infra`, each with its own MachineOSConfig
//! deleted mid-rollout): one `recover --apply --wait` heals both, one node at a time, in the
//! plan's order (by pool, then node): the second node is patched only once the first is back.

use super::*;
use testkit::mco::{CURRENT_IMAGE, DESIRED_IMAGE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_command_heals_two_pools_one_node_after_the_other() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::fast()).await;
    let _nodes_pull = nodes_registry(&cluster).await;
    let infra = infra_pool(&cluster).await;
    let (infra_stuck, worker_stuck) = tokio::join!(
        lose_the_image(&cluster, "infra", &infra[0]),
        lose_the_image(&cluster, "worker", &cluster.nodes[0]),
    );

    let plan = recover(&cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    let report = plan.json();
    assert_eq!(
        nodes_in(&report, "recoverable"),
        [infra_stuck.node.as_str(), worker_stuck.node.as_str()],
        "by pool, then node"
    );
    assert_the_runbook_cancel(&report["recoverable"][0], &infra_stuck);
    assert_the_runbook_cancel(&report["recoverable"][1], &worker_stuck);

    let (run, report) = apply_and_wait(&cluster).await;
    assert_eq!(
        pairs(&report["applied"], "node", "outcome"),
        [
            (infra_stuck.node.as_str(), "recovered"),
            (worker_stuck.node.as_str(), "recovered")
        ],
        "{report:#}"
    );
    // One node at a time: the second is patched only after the first is back.
    let order = [
        progress_line(&run, &format!("node {}: patching", infra_stuck.node)),
        progress_line(&run, &format!("node {}: recovered", infra_stuck.node)),
        progress_line(&run, &format!("node {}: patching", worker_stuck.node)),
        progress_line(&run, &format!("node {}: recovered", worker_stuck.node)),
    ];
    assert!(order.is_sorted(), "{order:?}: {run:?}");
    assert_eq!(
        pairs(&report["pools"], "pool", "outcome"),
        [("infra", "updated"), ("worker", "updated")],
        "{report:#}"
    );

    for (stuck, nodes) in [(&infra_stuck, &infra), (&worker_stuck, &cluster.nodes)] {
        let annotations = wait_node_back(&cluster, stuck).await;
        assert_recorded_once(&cluster, stuck, &annotations).await;
        wait_pool_settled_in(
            &cluster,
            &stuck.pool,
            nodes,
            |a| !a.contains_key(DESIRED_IMAGE) && !a.contains_key(CURRENT_IMAGE),
            &format!("pool {} reverted", stuck.pool),
        )
        .await;
        assert_pool_healthy(&cluster, &stuck.pool).await;
    }
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    eprintln!("two pools stuck and recovered in {:.2?}", started.elapsed());
}
