//! Steps the end-to-end tests share: the seeded cluster, the guard registered in front of it,
//! kubectl and `mosc-guard check` as an admin runs them, and waits for the pool to settle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::guard::{Guard, register_validating_webhook};
use super::mco::{CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DONE};
use super::scenario::{Cluster, Rollout, node_annotations, pool_condition, wait_for};
use super::simulator::SimConfig;

/// Generous bound for each wait. At the real builder's timing ([`SimConfig::real_timing`]) a
/// build takes 6-7 s and a delete event is handled 5 s late; a passing step needs at most ~10 s.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until MCO (the simulator) deleted the build's image from the registry and the
/// MachineOSBuilds of MOSC `worker`.
pub async fn wait_image_and_builds_gone(cluster: &Cluster, image: &super::image_ref::ImageRef) {
    let digest = image.digest.clone().expect("image has a digest");
    let (registry, client) = (&cluster.registry, &cluster.client);
    wait_for(
        || async {
            let gone = registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            let builds = super::scenario::mosbs_of(client, "worker").await?;
            Ok((gone && builds.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "the build's image and the MachineOSBuilds to be deleted",
    )
    .await
    .expect("image and builds deleted");
}

/// Runs kubectl against the cluster as the admin; panics only if kubectl cannot run.
pub async fn kubectl<const N: usize>(
    cluster: &Cluster,
    args: [&str; N],
) -> super::kubectl::KubectlOutput {
    let shown = args.join(" ");
    cluster
        .cp
        .kubectl(args)
        .await
        .unwrap_or_else(|e| panic!("running kubectl {shown}: {e}"))
}

/// Waits until pool `worker` reports NodeDegraded=True and returns that condition.
pub async fn wait_node_degraded(cluster: &Cluster) -> super::scenario::PoolCondition {
    wait_for(
        || async {
            Ok(pool_condition(&cluster.client, "worker", "NodeDegraded")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        "pool worker to report NodeDegraded=True",
    )
    .await
    .expect("pool degrades")
}

/// The shared per-test setup: a cluster with a 3-node `worker` pool and a simulator at the
/// timing the test names ([`SimConfig::real_timing`] or [`SimConfig::fast`]).
pub async fn seed(timing: SimConfig) -> Cluster {
    Cluster::seed(3, timing).await.expect("seed cluster")
}

/// A cluster with mosc-guard running and registered, and the report's steps 1-3 done: the
/// first worker is held mid-update to the new image.
pub struct Guarded {
    pub cluster: Cluster,
    pub guard: Guard,
    pub rollout: Rollout,
}

/// [`seed`] at `timing`, then a guard with `extra_args` registered as the validating webhook,
/// then the report's steps 1-3.
pub async fn guarded(timing: SimConfig, extra_args: &[&str]) -> Guarded {
    let cluster = seed(timing).await;
    let guard = Guard::start_with_args(&cluster.cp, extra_args)
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("webhook registered");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    Guarded {
        cluster,
        guard,
        rollout,
    }
}

/// `mosc-guard check TARGET` against the live control plane: (exit code, stdout, stderr).
pub fn check(cluster: &Cluster, target: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["check", target];
    args.extend_from_slice(extra);
    run_cli(cluster, &args)
}

/// `mosc-guard ARGS --kubeconfig <admin>`: (exit code, stdout, stderr).
pub fn run_cli(cluster: &Cluster, args: &[&str]) -> (i32, String, String) {
    let binary = super::guard::guard_binary().expect("the mosc-guard binary");
    let out = std::process::Command::new(binary)
        .args(args)
        .arg("--kubeconfig")
        .arg(cluster.cp.kubeconfig())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("run mosc-guard {args:?}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Records whether the pool ever reported Degraded or NodeDegraded while it runs.
pub struct DegradedWatch {
    seen: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl DegradedWatch {
    pub fn start(client: &kube::Client, pool: &'static str) -> Self {
        let (client, seen) = (client.clone(), Arc::new(AtomicBool::new(false)));
        let flag = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                if let Ok(conditions) = super::scenario::pool_conditions(&client, pool).await
                    && conditions
                        .iter()
                        .any(|(t, c)| (t == "Degraded" || t == "NodeDegraded") && c.is_true())
                {
                    flag.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { seen, task }
    }

    pub fn ever_degraded(&self) -> bool {
        self.seen.load(Ordering::SeqCst)
    }
}

impl Drop for DegradedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until every worker is Done with annotations that satisfy `settled`, and the pool
/// reports Updated.
pub async fn wait_pool_settled(
    cluster: &Cluster,
    settled: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
    what: &str,
) {
    wait_pool_settled_in(cluster, "worker", &cluster.nodes, settled, what).await;
}

/// Waits until each of `nodes` is Done with annotations that satisfy `settled`, and `pool`
/// reports Updated.
pub async fn wait_pool_settled_in(
    cluster: &Cluster,
    pool: &str,
    nodes: &[String],
    settled: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
    what: &str,
) {
    let client = &cluster.client;
    let settled = &settled;
    wait_for(
        || async move {
            for node in nodes {
                let a = node_annotations(client, node).await?;
                if a.get(STATE).map(String::as_str) != Some(STATE_DONE) || !settled(&a) {
                    return Ok(None);
                }
            }
            Ok(pool_condition(client, pool, "Updated")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        what,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Waits until every worker runs `image` and the pool reports Updated.
pub async fn wait_rolled_out(cluster: &Cluster, image: &str) {
    wait_pool_settled(
        cluster,
        |a| a.get(CURRENT_IMAGE).map(String::as_str) == Some(image),
        "every worker to run the image and the pool to be Updated",
    )
    .await;
}

/// Waits until each of `nodes` runs `image` and `pool` reports Updated.
pub async fn wait_rolled_out_in(cluster: &Cluster, pool: &str, nodes: &[String], image: &str) {
    wait_pool_settled_in(
        cluster,
        pool,
        nodes,
        |a| a.get(CURRENT_IMAGE).map(String::as_str) == Some(image),
        &format!("every node of pool {pool} to run the image and the pool to be Updated"),
    )
    .await;
}

/// The guard's /metrics text.
pub async fn guard_metrics(guard: &Guard) -> super::Result<String> {
    let url = format!("{}/metrics", guard.base_url());
    Ok(guard.https_client()?.get(url).send().await?.text().await?)
}

/// The abbreviated image the denial names: `.../ocb-image@sha256:<12 hex>...`.
pub fn short_image(rollout: &Rollout) -> String {
    let digest = rollout
        .build
        .image_ref()
        .expect("image reference")
        .digest
        .expect("digest");
    format!(".../ocb-image@{}...", &digest[..7 + 12])
}

/// Events (events.k8s.io/v1, namespace `default`, where Events about cluster-scoped objects
/// live) about the `kind` object `name` with `reason`.
pub async fn events_about(
    client: &kube::Client,
    kind: &str,
    name: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), "default");
    api.list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            let regarding = e.regarding.as_ref();
            e.reason.as_deref() == Some(reason)
                && regarding.and_then(|r| r.name.as_deref()) == Some(name)
                && regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
        })
        .collect()
}

/// Waits until the guard's digest index holds exactly one node with an image (the rolling one),
/// so what follows is decided from its cache.
pub async fn wait_index_holds_the_rolling_node(guard: &Guard) {
    wait_for(
        || async {
            let text = guard_metrics(guard).await?;
            Ok(text
                .contains("mosc_guard_cache_objects{cache=\"nodes_with_images\"} 1")
                .then_some(()))
        },
        STEP_TIMEOUT,
        "the guard's node index to hold the rolling node",
    )
    .await
    .expect("index current");
}

/// Waits until every worker is Done without image annotations (the pool left image mode and
/// its nodes rebased to the base OS image) and the pool reports Updated.
pub async fn wait_pool_reverted(cluster: &Cluster) {
    wait_pool_settled(
        cluster,
        |a| !a.contains_key(DESIRED_IMAGE) && !a.contains_key(CURRENT_IMAGE),
        "the pool to revert to the base OS image",
    )
    .await;
}

/// Asserts the registry still serves the build's image (`manifest_status` is `None` while the
/// manifest is there).
pub async fn assert_image_in_registry(cluster: &Cluster, image: &super::image_ref::ImageRef) {
    let digest = image.digest.clone().expect("image has a digest");
    assert_eq!(
        cluster
            .registry
            .manifest_status(&image.repo, &digest)
            .await
            .expect("registry"),
        None,
        "the image is still in the registry"
    );
}

/// The value of one series (`name{labels}` exactly as exposed) in a /metrics text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The guard's `/readyz`: status and body (`None` if it did not answer).
pub async fn readyz(guard: &Guard) -> Option<(u16, String)> {
    let resp = guard
        .https_client()
        .ok()?
        .get(format!("{}/readyz", guard.base_url()))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.unwrap_or_default()))
}

/// An AdmissionReview of a DELETE of the MachineOSConfig `old` (as the API server sends it),
/// for posting to the guard's /validate directly (e.g. while the API server is down).
pub fn mosc_delete_review(uid: &str, old: &serde_json::Value) -> serde_json::Value {
    let name = old["metadata"]["name"].clone();
    let gvk =
        serde_json::json!({"group": super::mco::GROUP, "version": "v1", "kind": "MachineOSConfig"});
    let gvr = serde_json::json!({"group": super::mco::GROUP, "version": "v1", "resource": "machineosconfigs"});
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name,
            "operation": "DELETE",
            "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "object": null,
            "oldObject": old,
            "dryRun": true,
            "options": {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}
        }
    })
}

/// Posts `review` to the guard's /validate: (allowed, the refusal message).
pub async fn post_review(
    guard: &Guard,
    review: &serde_json::Value,
) -> super::Result<(bool, String)> {
    let resp: serde_json::Value = guard
        .https_client()?
        .post(guard.validate_url())
        .json(review)
        .timeout(Duration::from_secs(15))
        .send()
        .await?
        .json()
        .await?;
    let allowed = resp["response"]["allowed"].as_bool().ok_or("no verdict")?;
    let message = resp["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok((allowed, message))
}
