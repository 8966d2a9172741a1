//! The confirming read's fence on a real kube-apiserver (docs/design.md, "Confirming an allow"):
//! the node cache counts as caught up with a revision only once its watch has delivered every
//! node change at or below it. The cache reaches the API server through a forwarder that can
//! hold back what the server sends, so its watch lags behind a change the test commits.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use mosc_guard::access::live;
use mosc_guard::access::node_cache::NodeCache;
use testkit::controlplane::{ControlPlane, client_from_kubeconfig};
use testkit::forwarder::Forwarder;
use testkit::mco::{self, DESIRED_IMAGE};
use testkit::scenario::{create_nodes, wait_for};

const IMAGE: &str = "registry.example/ocb-image@sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// What the node cache's own user may do: list and watch nodes.
const CACHE_RBAC: &str = "
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: fence-cache}
rules:
- {apiGroups: [''], resources: [nodes], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fence-cache}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fence-cache}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: fence-cache}
";

/// Waits until the node cache completed its first list.
async fn synced(cache: &NodeCache) {
    wait_for(
        || async { Ok(cache.synced().then_some(())) },
        Duration::from_secs(60),
        "node cache synced",
    )
    .await
    .expect("synced");
}

/// Creates `names` as worker nodes on rendered-worker-0.
async fn create_workers(client: &kube::Client, names: &[String]) {
    create_nodes(
        client,
        names,
        "node-role.kubernetes.io/worker",
        "rendered-worker-0",
    )
    .await
    .expect("nodes");
}

fn desired_of(cache: &NodeCache, node: &str) -> Option<String> {
    cache
        .nodes(None, mosc_guard::core::policy::PolicyMode::InFlight)
        .iter()
        .find(|n| n.name() == node)
        .and_then(|n| n.desired_image().map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_holds_until_a_lagging_node_watch_delivers_the_change() {
    let cp = ControlPlane::start().await.expect("control plane");
    let node = "ip-10-0-1-1.us-east-2.compute.internal";
    create_workers(&cp.client(), &[node.to_string()]).await;

    // The cache's own connection to the API server goes through the forwarder.
    let forwarder = Forwarder::to_apiserver(&cp).await.expect("forwarder");
    testkit::users::apply(&cp, CACHE_RBAC).await.expect("RBAC");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        testkit::users::kubeconfig_via(&cp, "fence-cache", dir.path(), &forwarder.https_url())
            .expect("kubeconfig");
    let lagging = client_from_kubeconfig(&kubeconfig).await.expect("client");
    let cache = NodeCache::start(lagging, Duration::from_secs(30));
    synced(&cache).await;
    assert_eq!(desired_of(&cache, node), None);

    // MCO targets the node while the cache's watch lags; the fence revision is read after the
    // change was committed, directly from the API server.
    forwarder.pause();
    mco::nodes(&cp.client())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {DESIRED_IMAGE: IMAGE}}})),
        )
        .await
        .expect("target the node");
    let fence = live::node_revision(&cp.client())
        .await
        .expect("revision read")
        .expect("etcd revisions are numbers");
    assert!(
        tokio::time::timeout(Duration::from_secs(2), cache.caught_up(fence))
            .await
            .is_err(),
        "the cache (at {}) must not count as caught up with {fence} before its watch delivers the change",
        cache.revision()
    );
    assert_eq!(
        desired_of(&cache, node),
        None,
        "the watch lags: the cache has not seen the change (else this test proves nothing)"
    );

    // Once the watch delivers, the fence passes and the cache has the change.
    forwarder.resume();
    tokio::time::timeout(Duration::from_secs(30), cache.caught_up(fence))
        .await
        .expect("the fence passes once the watch delivers");
    assert_eq!(desired_of(&cache, node).as_deref(), Some(IMAGE));
    assert!(cache.revision() >= fence);
}

/// A quiet cluster still moves the fence: other kinds' writes raise the revision a
/// confirmation reads, and the node watch's bookmarks (or the next node change) carry the
/// node cache past it. Without any node event the fence may not pass quickly, which is why a
/// confirmation also lists nodes after `--fence-wait-ms`; here a node change after the fence
/// revision must carry it past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_node_change_carries_the_cache_past_an_earlier_revision() {
    let cp = ControlPlane::start().await.expect("control plane");
    let names = ["n-1".to_string(), "n-2".to_string()];
    create_workers(&cp.client(), &names).await;
    let cache = NodeCache::start(cp.client(), Duration::from_secs(30));
    synced(&cache).await;
    // Writes of another kind move the revision past everything the node watch has seen.
    for i in 0..3 {
        let out = cp
            .kubectl(["create", "namespace", &format!("fence-{i}")])
            .await
            .expect("kubectl");
        assert!(out.success(), "{out:?}");
    }
    let fence = live::node_revision(&cp.client())
        .await
        .expect("revision read")
        .expect("number");
    assert!(
        fence > cache.revision(),
        "the fence is ahead of the node cache"
    );
    mco::nodes(&cp.client())
        .patch(
            "n-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("node change");
    tokio::time::timeout(Duration::from_secs(30), cache.caught_up(fence))
        .await
        .expect("the node change carries the cache past the fence");
}

/// Both node reads page (1,000 nodes a page, the next requested while one is decoded): the
/// cache's list and a confirmation's full list see every node of a cluster larger than a page,
/// and the full list keeps only the labels the pools' selectors read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lists_page_through_every_node() {
    const NODES: usize = 2_100;
    let cp = ControlPlane::start().await.expect("control plane");
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i:05}")).collect();
    for chunk in names.chunks(300) {
        let client = cp.client();
        let chunk = chunk.to_vec();
        create_workers(&client, &chunk).await;
    }
    let cache = NodeCache::start(cp.client(), Duration::from_secs(30));
    synced(&cache).await;
    assert_eq!(cache.sizes().0, NODES, "the cache listed every page");

    let pool: mosc_guard::core::model::MachineConfigPool = serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}
    }))
    .expect("pool");
    let listed = live::nodes_for(&cp.client(), &[std::sync::Arc::new(pool)])
        .await
        .expect("list")
        .expect("nodes are served");
    assert_eq!(listed.len(), NODES, "the full list read every page");
    let labels: Vec<(&str, &str)> = listed[0].labels().collect();
    assert_eq!(
        labels,
        [
            ("kubernetes.io/os", "linux"),
            ("node-role.kubernetes.io/worker", "")
        ],
        "only the labels membership reads are kept: the selector's and the OS label"
    );
}

/// The confirmation's two ways to nodes, through `Caches::fresh`: on a quiet cluster (no node
/// event after the fence revision) it lists every node after `--fence-wait-ms`; after a node
/// change the node cache passes the fence. Either way the nodes it hands the policy hold every
/// change committed before the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_lists_nodes_on_a_quiet_cluster_and_sees_every_prior_change() {
    use mosc_guard::access::caches::Caches;
    use mosc_guard::access::view::{ClusterView, FreshNodes};

    let cp = ControlPlane::start().await.expect("control plane");
    let names: Vec<String> = (0..3).map(|i| format!("quiet-{i}")).collect();
    create_workers(&cp.client(), &names).await;
    let caches = Caches::start(cp.client(), Duration::from_secs(30))
        .with_fence_wait(Duration::from_millis(50));
    wait_for(
        || async { Ok(caches.synced().then_some(())) },
        Duration::from_secs(60),
        "caches synced",
    )
    .await
    .expect("synced");

    // A write of another kind moves the revision past the node cache; no node event follows.
    let out = cp
        .kubectl(["create", "namespace", "quiet"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    let fresh = tokio::time::timeout(Duration::from_secs(10), caches.fresh())
        .await
        .expect("a quiet cluster's confirmation ends (by listing)")
        .expect("confirming read");
    match &fresh.nodes {
        FreshNodes::Listed(nodes) => assert_eq!(nodes.len(), names.len()),
        FreshNodes::Cached => panic!("no node event passed the fence: the nodes must be listed"),
    }

    // A node change just before the call is in the nodes, whichever way they came.
    mco::nodes(&cp.client())
        .patch(
            "quiet-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {DESIRED_IMAGE: IMAGE}}})),
        )
        .await
        .expect("target the node");
    let fresh = caches.fresh().await.expect("confirming read");
    let nodes = match &fresh.nodes {
        FreshNodes::Listed(nodes) => nodes.clone(),
        FreshNodes::Cached => caches.nodes(None, mosc_guard::core::policy::PolicyMode::InFlight),
    };
    let targeted = nodes
        .iter()
        .find(|n| n.name() == "quiet-1")
        .expect("the node is there");
    assert_eq!(targeted.desired_image(), Some(IMAGE));
}
