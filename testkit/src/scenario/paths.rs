//! MCO's paths beyond the report's (on the cluster's release, 4.20 by default), as steps: a pool settled on its first image, a config
//! change rendered, a new build, the first node caught mid-update, a guard registered in
//! front (with the mutating webhook too in defer mode).

use super::cluster::{Build, Cluster, STEP_TIMEOUT};
use super::create::{create_mosc, create_pool};
use super::pipeline::render_pool;
use super::read::{node_annotations, pool_condition};
use super::wait::{DegradedWatch, wait_for, wait_for_build, wait_rolled_out};
use crate::guard::{Guard, GuardBin};
use crate::mco::{DESIRED_IMAGE, STATE, STATE_WORKING};
use crate::webhooks::register_webhooks;

/// The `serve` arguments of defer mode; the Lease lives in `default` (the kit's control plane
/// has no `mosc-guard` namespace).
pub const DEFER: &[&str] = &["--deletion-mode", "defer", "--lease-namespace", "default"];

/// Starts a guard (`bin`) with `args`, registered as the validating (and in defer mode the mutating)
/// webhook.
pub async fn registered_guard(bin: &GuardBin, cluster: &Cluster, args: &[&str]) -> Guard {
    let guard = bin
        .serve(&cluster.cp)
        .args(args)
        .start()
        .await
        .expect("mosc-guard starts");
    register_webhooks(&cluster.cp, &guard, args.contains(&"defer"))
        .await
        .expect("webhooks registered");
    guard
}

/// A second pool, `infra`, with no nodes, opted into image mode: MOSC `infra` created.
pub async fn create_infra_mosc(cluster: &Cluster) {
    create_pool(&cluster.client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("create pool infra");
    create_mosc(&cluster.client, "infra", &cluster.push_spec())
        .await
        .expect("create MOSC infra");
}

/// Creates MOSC `worker` and waits until every worker runs its first image.
pub async fn layered_and_settled(cluster: &Cluster) -> Build {
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("create MOSC");
    let build = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("first build");
    wait_rolled_out(cluster, &build.image).await;
    build
}

/// Points pool `worker` at another rendered MachineConfig (what the render controller does
/// when a MachineConfig changes): [`render_pool`].
pub async fn render(cluster: &Cluster, rendered: &str) {
    render_pool(cluster, "worker", rendered)
        .await
        .expect("change the pool's rendered config");
}

/// Waits until the MOSC's current image differs from `previous` and its build succeeded.
pub async fn wait_new_build(cluster: &Cluster, previous: &str) -> Build {
    wait_for(
        || async {
            let b = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT).await?;
            Ok((b.image != previous).then_some(b))
        },
        STEP_TIMEOUT,
        "a new build of worker to succeed",
    )
    .await
    .expect("new build")
}

/// Waits until pool `worker` reports `Updating` with `status` and a message containing `text`.
pub async fn wait_pool_updating(cluster: &Cluster, status: &str, text: &str) {
    wait_for(
        || async {
            let c = pool_condition(&cluster.client, "worker", "Updating").await?;
            Ok(c.filter(|c| c.status == status && c.message.contains(text))
                .map(|_| ()))
        },
        STEP_TIMEOUT,
        &format!("pool worker Updating={status} with {text:?}"),
    )
    .await
    .expect("pool reports the build");
}

/// Holds the first worker and waits until it is Working with desiredImage `image`.
pub async fn catch_first_node_updating_to(cluster: &Cluster, image: &str) -> String {
    let node = cluster.nodes[0].clone();
    let client = &cluster.client;
    let node_ref = &node;
    wait_for(
        || async move {
            let a = node_annotations(client, node_ref).await?;
            let working = a.get(STATE).map(String::as_str) == Some(STATE_WORKING);
            Ok((working && a.get(DESIRED_IMAGE).map(String::as_str) == Some(image)).then_some(()))
        },
        STEP_TIMEOUT,
        &format!("{node} to be Working with desiredImage {image}"),
    )
    .await
    .expect("first node mid-update");
    node
}

/// The simulator wrote nothing a real 4.20 API server rejects, and the pool never degraded.
pub fn assert_faithful_and_never_degraded(cluster: &Cluster, watch: &DegradedWatch) {
    assert_eq!(
        cluster.sim.rejected_writes(),
        Vec::<String>::new(),
        "the simulator wrote objects the API server rejected"
    );
    assert!(!watch.ever_degraded(), "pool worker degraded");
}
