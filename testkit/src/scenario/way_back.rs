//! A node the bug already hurt, and the way back by hand: the report's scenario without the guard
//! ([`lose_the_image`]), what MCO leaves ([`wait_stuck`]: the
//! node Degraded with the played release's reason, cordoned and drained, its pool NodeDegraded),
//! its pool frozen ([`assert_pool_frozen`]), the runbook's cancel of the failed target
//! ([`cancel_target_by_hand`]: one `kubectl patch node --type=json` whose `test` operations
//! make it fail if anything moved), and the node back ([`wait_node_back`]: Done, uncordoned by
//! its daemon, no reboot). `mosc-guard recover --apply` makes the same patch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::cluster::{Cluster, Rollout, STEP_TIMEOUT, lost_image_reason};
use super::read::{kubectl, pool_conditions};
use super::wait::{wait_for, wait_image_and_builds_of_gone};
use crate::kubectl::KubectlOutput;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE,
    LAST_APPLIED_DRAIN, REASON, STATE, STATE_DEGRADED, STATE_DONE, drain_request, is_unschedulable,
    node_annotation, uncordon_request,
};

/// A node stuck on a lost image, as its daemon leaves it.
#[derive(Debug, Clone)]
pub struct Stuck {
    pub node: String,
    pub pool: String,
    /// Its desiredImage: the image that is gone.
    pub image: String,
    /// Its currentConfig (= desiredConfig).
    pub config: String,
    /// Its currentImage, if it ran a layered image before.
    pub current_image: Option<String>,
    /// Its `reason` annotation.
    pub reason: String,
    /// `status.nodeInfo.bootID` while stuck.
    pub boot_id: String,
}

/// The report's scenario without the guard, on `pool`: `node`'s daemon held mid-update to the
/// first image of MOSC `pool` ([`Cluster::start_rollout`]), the MOSC deleted at once with
/// `kubectl delete`, MCO deleting the image and the builds, the daemon released; returns the
/// node stuck as MCO leaves it ([`wait_stuck`]).
pub async fn lose_the_image(cluster: &Cluster, pool: &str, node: &str) -> Stuck {
    let rollout = cluster
        .start_rollout(pool, node, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{pool}: the layered rollout starts: {e}"));
    lose_the_rollouts_image(cluster, pool, &rollout).await
}

/// [`lose_the_image`] from its rollout on (`rollout.node` held mid-update to the first image
/// of MOSC `pool`, [`Cluster::start_rollout`]): a test that keeps a copy of the image first.
pub async fn lose_the_rollouts_image(cluster: &Cluster, pool: &str, rollout: &Rollout) -> Stuck {
    let node = rollout.node.as_str();
    let out = kubectl(cluster, ["delete", "machineosconfig", pool]).await;
    assert!(
        out.success(),
        "delete MOSC {pool} without the guard: {out:?}"
    );
    let image = rollout.build.image_ref().expect("image reference");
    wait_image_and_builds_of_gone(cluster, pool, &image).await;
    cluster.sim.release(node);
    wait_stuck(cluster, pool, rollout).await
}

/// Waits until `rollout.node` (released after its image was deleted) is stuck as MCO leaves it
/// and checks every part of that: Degraded with the release's reason for the lost image,
/// unschedulable, `desiredDrain` = `lastAppliedDrain` = `drain-<desiredConfig>`, a boot ID, and
/// its pool NodeDegraded and Degraded naming it.
pub async fn wait_stuck(cluster: &Cluster, pool: &str, rollout: &Rollout) -> Stuck {
    let client = &cluster.client;
    let name = &rollout.node;
    let node: Node = wait_for(
        || async {
            let n = mco::nodes(client).get(name).await?;
            let reported = pool_conditions(client, pool)
                .await?
                .get("NodeDegraded")
                .is_some_and(|c| c.is_true() && c.message.contains(name.as_str()));
            let degraded = node_annotation(&n, STATE) == Some(STATE_DEGRADED);
            Ok((degraded && reported).then_some(n))
        },
        STEP_TIMEOUT,
        &format!("{name} to be Degraded and pool {pool} NodeDegraded"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let a = |key| node_annotation(&node, key).map(str::to_owned);
    let stuck = Stuck {
        node: name.clone(),
        pool: pool.to_owned(),
        image: a(DESIRED_IMAGE).unwrap_or_default(),
        config: a(CURRENT_CONFIG).unwrap_or_default(),
        current_image: a(CURRENT_IMAGE),
        reason: a(REASON).unwrap_or_default(),
        boot_id: crate::kubelet::boot_id(&node)
            .unwrap_or_default()
            .to_owned(),
    };
    assert_eq!(
        stuck.image, rollout.build.image,
        "{name} keeps desiredImage"
    );
    assert_eq!(a(DESIRED_CONFIG).as_deref(), Some(stuck.config.as_str()));
    assert_eq!(stuck.reason, lost_image_reason(cluster, &stuck.image));
    let drained = drain_request(&stuck.config);
    assert_eq!(
        (a(DESIRED_DRAIN), a(LAST_APPLIED_DRAIN)),
        (Some(drained.clone()), Some(drained)),
        "{name} drained as its daemon left it"
    );
    assert!(is_unschedulable(&node), "{name} stays cordoned");
    assert!(!stuck.boot_id.is_empty(), "{name} reports a boot ID");
    let conditions = pool_conditions(client, pool).await.expect("pool");
    for type_ in ["NodeDegraded", "Degraded"] {
        let c = conditions
            .get(type_)
            .cloned()
            .unwrap_or_else(|| panic!("{type_}"));
        assert!(
            c.is_true() && c.message.contains(name.as_str()),
            "{type_}: {c:?}"
        );
    }
    stuck
}

/// Asserts, for `window`, that none of `nodes` of `pool` is sent to `rendered` (a MachineConfig
/// change the pool's nodes should all get) and that `stuck` stays Degraded: the stuck node uses
/// the pool's `maxUnavailable`, so MCO's node controller targets no other node.
pub async fn assert_pool_frozen(
    cluster: &Cluster,
    stuck: &Stuck,
    nodes: &[String],
    rendered: &str,
    window: Duration,
) {
    let started = Instant::now();
    while started.elapsed() < window {
        for name in nodes {
            let node = mco::nodes(&cluster.client).get(name).await.expect("node");
            assert_ne!(
                node_annotation(&node, DESIRED_CONFIG),
                Some(rendered),
                "{name} was sent to {rendered} while {} is stuck",
                stuck.node
            );
        }
        let node = mco::nodes(&cluster.client)
            .get(&stuck.node)
            .await
            .expect("node");
        assert_eq!(node_annotation(&node, STATE), Some(STATE_DEGRADED));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The runbook's cancel of `stuck`'s failed target as a JSON patch: `test` operations on
/// `state`, `desiredImage`, `desiredConfig` and `currentConfig` (the patch fails if any moved),
/// then desiredImage back to currentImage (removed when the node runs no layered image) and
/// desiredConfig back to currentConfig.
pub fn cancel_patch(stuck: &Stuck) -> Value {
    let path = |key: &str| format!("/metadata/annotations/{}", key.replace('/', "~1"));
    let mut ops = vec![
        json!({"op": "test", "path": path(STATE), "value": STATE_DEGRADED}),
        json!({"op": "test", "path": path(DESIRED_IMAGE), "value": stuck.image}),
        json!({"op": "test", "path": path(DESIRED_CONFIG), "value": stuck.config}),
        json!({"op": "test", "path": path(CURRENT_CONFIG), "value": stuck.config}),
    ];
    ops.push(match &stuck.current_image {
        Some(current) => json!({"op": "replace", "path": path(DESIRED_IMAGE), "value": current}),
        None => json!({"op": "remove", "path": path(DESIRED_IMAGE)}),
    });
    ops.push(json!({"op": "replace", "path": path(DESIRED_CONFIG), "value": stuck.config}));
    Value::Array(ops)
}

/// `kubectl patch node <node> --type=json -p <cancel_patch>` as the admin.
pub async fn cancel_target_by_hand(cluster: &Cluster, stuck: &Stuck) -> KubectlOutput {
    let patch = cancel_patch(stuck).to_string();
    kubectl(
        cluster,
        ["patch", "node", &stuck.node, "--type=json", "-p", &patch],
    )
    .await
}

/// Waits until `stuck`'s daemon brought it back and checks how: Done with an empty reason,
/// schedulable, `desiredDrain` = `lastAppliedDrain` = `uncordon-<currentConfig>`, no
/// desiredImage other than its currentImage, and the same boot ID (no reboot). Returns its
/// annotations.
pub async fn wait_node_back(cluster: &Cluster, stuck: &Stuck) -> BTreeMap<String, String> {
    let client = &cluster.client;
    let uncordoned = uncordon_request(&stuck.config);
    let node: Node = wait_for(
        || async {
            let n = mco::nodes(client).get(&stuck.node).await?;
            let back = node_annotation(&n, STATE) == Some(STATE_DONE)
                && !is_unschedulable(&n)
                && node_annotation(&n, LAST_APPLIED_DRAIN) == Some(uncordoned.as_str());
            Ok(back.then_some(n))
        },
        STEP_TIMEOUT,
        &format!("{} to be Done and uncordoned", stuck.node),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let a = |key: &str| annotations.get(key).cloned();
    assert_eq!(a(REASON).unwrap_or_default(), "", "reason cleared");
    assert_eq!(a(DESIRED_DRAIN), Some(uncordoned.clone()));
    assert_eq!(
        a(DESIRED_IMAGE),
        stuck.current_image,
        "no target left but what it runs"
    );
    assert_eq!(a(CURRENT_IMAGE), stuck.current_image);
    assert_eq!(
        crate::kubelet::boot_id(&node),
        Some(stuck.boot_id.as_str()),
        "{} did not reboot",
        stuck.node
    );
    annotations
}
