//! Issue 25, the harness half: MCO's build pipeline as the simulator plays it, through the real
//! API server, with the build controller acting as the machine-os-builder's service account
//! (`testkit::mco::MOB_USER`). Without a guard, these tests pin down what MCO does (so the
//! guard's end-to-end tests can rely on it), and that nothing it writes is rejected; the
//! `guarded*` ones show the guard never standing in its way.
//!
//! - [`config_change`]: a config change mid-rollout; the new build is named at its start
//!   (4.20) and the MOSC's `status.machineOSBuild` written only on success (4.21); the node
//!   controller stops the rollout until it succeeded;
//! - [`supersede`]: a failing build, then the fix superseding it (the failed build deleted when
//!   the fix starts; an error there aborts the fix's start, which is retried);
//! - [`reuse`]: a config rolled back while a build runs (the running build deleted), a reused
//!   build whose image is gone (deleted and built again), a build Job the API server refuses
//!   (the MOSB kept unstarted until it can start);
//! - [`prebuilt`]: 4.21's pre-built image seeding, and 4.20 ignoring it;
//! - [`cleanup`]: a MOSC recreated over a build of the one it replaced, then deleted: an early
//!   4.20.z (mid-upgrade, its old builder still running) deletes that build's image by label,
//!   4.23 does not;
//! - [`guarded`]: with the guard in front, the builder's own deletion of a build a node is
//!   pulling (the rebuild annotation) reaches it as MCO's and is admitted;
//! - [`guarded_workflow`]: the config change with a failing build superseded by a fix, with the
//!   guard in deny mode (4.20) and defer mode (4.21): it completes as without the guard;
//! - [`guarded_releases`]: the recreated MOSC's orphaned build, guarded: refused on an early
//!   4.20.z until its node arrives, allowed on 4.23, decided with both releases mid-upgrade.
//!
//! Each test starts its own control plane (a few seconds) and says its simulator timing.

mod cleanup;
mod config_change;
mod guarded;
mod guarded_releases;
mod guarded_workflow;
mod prebuilt;
mod reuse;
mod supersede;

use std::time::Duration;

use testkit::mco::{self, CURRENT_MOSB, DESIRED_IMAGE};
use testkit::scenario::*;

/// A second rendered config of pool `worker` (the render controller is not simulated).
const R2: &str = "rendered-worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// MOSC `mosc`'s current-build annotation.
async fn current_build(cluster: &Cluster, mosc: &str) -> Option<String> {
    mco::moscs(&cluster.client)
        .get(mosc)
        .await
        .expect("MOSC")
        .metadata
        .annotations
        .and_then(|mut a| a.remove(CURRENT_MOSB))
}

/// A MachineConfig change: pool worker rendered to [`R2`]. Returns the name of the build for
/// R2's inputs, B.
async fn render_r2(cluster: &Cluster) -> String {
    render_pool(cluster, "worker", R2).await.expect("render R2");
    build_name_for(cluster, "worker").await.expect("B's name")
}

/// Asserts every worker still desires `image` (X): nothing moved them on.
async fn assert_workers_stay_on(cluster: &Cluster, image: &str) {
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await.expect("node");
        assert_eq!(
            a.get(DESIRED_IMAGE).map(String::as_str),
            Some(image),
            "{node} stays on X"
        );
    }
}

/// MachineOSBuild `name`'s uid: the same uid means the same object, not one created again.
async fn mosb_uid(cluster: &Cluster, name: &str) -> Option<String> {
    mco::mosbs(&cluster.client)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("MachineOSBuild {name}: {e}"))
        .metadata
        .uid
}

/// The fix of a failing build: MOSC worker's Containerfile changed to install `package`.
/// Returns the name of the build for the new inputs, another than `failed`'s.
async fn fix_containerfile(cluster: &Cluster, package: &str, failed: &str) -> String {
    change_containerfile(
        cluster,
        "worker",
        &format!(
            "FROM configs AS final\nRUN dnf install -y {package} && dnf clean all && echo fixed\n"
        ),
    )
    .await
    .expect("fix the Containerfile");
    let fixed = build_name_for(cluster, "worker")
        .await
        .expect("the fixed build's name");
    assert_ne!(fixed, failed, "new inputs, new build");
    fixed
}

/// Asserts for `how_long` that none of `nodes` is told to run `image` (or any image, when
/// `None`): the node controller has stopped the rollout.
async fn assert_not_targeted(
    cluster: &Cluster,
    nodes: &[String],
    image: Option<&str>,
    how_long: Duration,
) {
    let deadline = tokio::time::Instant::now() + how_long;
    while tokio::time::Instant::now() < deadline {
        for node in nodes {
            let desired = node_annotation(&cluster.client, node, DESIRED_IMAGE)
                .await
                .expect("node");
            let targeted = match image {
                Some(image) => desired.as_deref() == Some(image),
                None => desired.is_some(),
            };
            assert!(!targeted, "{node} was sent to {desired:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until MachineOSBuild `name` is gone.
async fn wait_build_gone(cluster: &Cluster, name: &str) {
    wait_gone(&mco::mosbs(&cluster.client), name, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("MachineOSBuild {name} deleted: {e}"));
}
