//! The simulated machine-config-daemon and drain controller update nodes as MCO's do (release
//! 4.20, `pkg/daemon/{update,drain}.go`, `pkg/controller/drain`), seen through a real API server:
//! a node mid-update is Working, cordoned and drained (`desiredDrain` = `lastAppliedDrain` =
//! `drain-<config>`); once updated it has rebooted (a new `status.nodeInfo.bootID`), is
//! uncordoned (`uncordon-<config>` both), Done with an empty reason; and a single-node cluster's
//! node is never drained. What a failed update and its cancel look like: `tests/recover/pool/`.
//!
//! Each test starts its own control plane and registry ([`SimConfig::fast`]: no deletion is
//! timed here).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use testkit::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_DRAIN, LAST_APPLIED_DRAIN, REASON, STATE,
    STATE_DONE, STATE_WORKING, drain_request, uncordon_request,
};
use testkit::scenario::{
    Cluster, STEP_TIMEOUT, create_labelled_nodes, create_pool, rendered_config, seed,
    set_single_node, wait_for, wait_rolled_out, wait_rolled_out_in,
};
use testkit::simulator::SimConfig;

const MASTER_ROLE: &str = "node-role.kubernetes.io/master";
const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";

async fn node(cluster: &Cluster, name: &str) -> Node {
    mco::nodes(&cluster.client).get(name).await.expect("node")
}

fn annotations(node: &Node) -> BTreeMap<String, String> {
    node.metadata.annotations.clone().unwrap_or_default()
}

fn boot_id(node: &Node) -> String {
    testkit::kubelet::boot_id(node)
        .expect("the node reports a boot ID")
        .to_owned()
}

/// The boot ID of each node.
async fn boot_ids(cluster: &Cluster) -> BTreeMap<String, String> {
    let mut ids = BTreeMap::new();
    for name in &cluster.nodes {
        ids.insert(name.clone(), boot_id(&node(cluster, name).await));
    }
    ids
}

/// Asserts every node settled as the daemon leaves an updated node: Done, empty reason,
/// uncordoned by the drain controller, rebooted since `before`.
async fn assert_updated_and_rebooted(cluster: &Cluster, before: &BTreeMap<String, String>) {
    for name in &cluster.nodes {
        let n = node(cluster, name).await;
        let a = annotations(&n);
        let config = a.get(CURRENT_CONFIG).cloned().unwrap_or_default();
        assert_eq!(a.get(STATE).map(String::as_str), Some(STATE_DONE), "{name}");
        assert_eq!(
            a.get(REASON).map(String::as_str),
            Some(""),
            "{name}: reason cleared"
        );
        let uncordoned = uncordon_request(&config);
        assert_eq!(
            (a.get(DESIRED_DRAIN), a.get(LAST_APPLIED_DRAIN)),
            (Some(&uncordoned), Some(&uncordoned)),
            "{name}"
        );
        assert!(!mco::is_unschedulable(&n), "{name} is schedulable again");
        assert_ne!(boot_id(&n), before[name], "{name} rebooted into its image");
    }
}

/// A layered rollout: the held first node is caught Working, cordoned and drained while the
/// others wait (it uses the pool's maxUnavailable); released, every node ends rebooted,
/// uncordoned and Done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_drains_reboots_and_uncordons_each_node() {
    let cluster = seed(SimConfig::fast()).await;
    let before = boot_ids(&cluster).await;
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let config = rendered_config("worker");
    let drained = drain_request(&config);
    let caught = wait_for(
        || async {
            let n = node(&cluster, &rollout.node).await;
            let a = annotations(&n);
            let done = a.get(LAST_APPLIED_DRAIN) == Some(&drained) && mco::is_unschedulable(&n);
            Ok(done.then_some(n))
        },
        STEP_TIMEOUT,
        "the first node to be drained",
    )
    .await
    .expect("drained");
    let a = annotations(&caught);
    assert_eq!(a.get(STATE).map(String::as_str), Some(STATE_WORKING));
    assert_eq!(a.get(DESIRED_DRAIN), Some(&drained));
    assert_eq!(a.get(CURRENT_IMAGE), None, "not rebased while held");
    assert_eq!(
        boot_id(&caught),
        before[&rollout.node],
        "not rebooted while held"
    );
    for other in &cluster.nodes[1..] {
        let n = node(&cluster, other).await;
        assert!(!mco::is_unschedulable(&n), "{other} is not drained yet");
        assert_eq!(
            annotations(&n).get(STATE).map(String::as_str),
            Some(STATE_DONE)
        );
    }

    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    assert_updated_and_rebooted(&cluster, &before).await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
}

/// A single-node cluster (`controlPlaneTopology: SingleReplica`): its daemon updates and
/// reboots it without asking for a drain (`drainRequired`), and still asks the drain controller
/// to uncordon it when done (`completeUpdate`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_cluster_updates_without_a_drain() {
    let mut cluster = Cluster::bare(SimConfig::fast())
        .await
        .expect("start the cluster");
    let client = cluster.client.clone();
    create_pool(&client, "master", MASTER_ROLE, 1)
        .await
        .expect("pool master");
    create_pool(&client, "worker", WORKER_ROLE, 1)
        .await
        .expect("pool worker");
    let name = "sno.example.com".to_owned();
    create_labelled_nodes(
        &client,
        std::slice::from_ref(&name),
        &[(MASTER_ROLE, ""), (WORKER_ROLE, "")],
        &rendered_config("master"),
    )
    .await
    .expect("the single node");
    set_single_node(&client, &name).await.expect("topology");
    cluster.nodes = vec![name.clone()];
    let before = boot_ids(&cluster).await;

    let rollout = cluster
        .start_rollout("master", &name, STEP_TIMEOUT)
        .await
        .expect("rollout starts");
    // Held just before its rebase: Working, and no drain was asked for.
    let n = node(&cluster, &name).await;
    let uncordoned = uncordon_request(&rendered_config("master"));
    assert_eq!(annotations(&n).get(DESIRED_DRAIN), Some(&uncordoned));
    assert!(
        !mco::is_unschedulable(&n),
        "a single node is never cordoned"
    );

    cluster.sim.release(&name);
    wait_rolled_out_in(&cluster, "master", &cluster.nodes, &rollout.build.image).await;
    assert_updated_and_rebooted(&cluster, &before).await;
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
}
