//! Issue 38 items 3 and 4: `mosc-guard prune` as MCO decides, per release, on the real control plane
//! (with the real garbage collector), the registry and the MCO simulator, the guard registered
//! in deny mode in front, the CLI run as the admin:
//!
//! - [`history`]: a pool through several rendered configs; after `prune --apply` every node still
//!   updates and rolls back (to a kept build, reused; to a pruned one, built again), and the
//!   registry holds only the images of the builds `--keep` and the nodes need; a change rolled
//!   back while the new config's build runs reuses the build prune kept for the pool's
//!   `status.configuration`;
//! - [`releases`]: a MachineOSConfig deleted with `--cascade=orphan` and recreated: 4.19 and an
//!   early 4.20.z clean up its builds by label themselves, a late 4.20.z and 4.23 (by controller)
//!   never do, and prune deletes them and their images; a pre-built image's synthetic build (4.21) is kept, with the tag it shares;
//!   on 4.23 a build whose image a node still runs is kept, and once the node moved on it goes,
//!   its image with it (nothing leaked);
//! - [`images`]: the images no build names, on the registry behind TLS and token auth where the
//!   MachineOSConfig pushes: the ones 4.23's in-use check leaks (a build or its config deleted
//!   while nodes ran the image) listed, kept while a node runs them, then deleted with
//!   `--apply --images`; refused credentials, a tag deleted behind prune's back, a registry
//!   without deletes.
//!
//! Every test runs the simulator at [`SimConfig::fast`] (the order of events is what matters) and
//! asserts that MCO was never refused and the pool never degraded.

mod history;
mod images;
mod releases;

use serde_json::Value;
use testkit::cli::CliRun;
use testkit::guard::GuardBin;
use testkit::image_ref::ImageRef;
use testkit::scenario::*;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// Rendered configs of pool `worker` after its first (the render controller is not simulated).
const R1: &str = "rendered-worker-11111111111111111111111111111111";
const R2: &str = "rendered-worker-22222222222222222222222222222222";
const R3: &str = "rendered-worker-33333333333333333333333333333333";
const R4: &str = "rendered-worker-44444444444444444444444444444444";

/// `mosc-guard prune --keep-younger-than 0s ARGS` as the admin (the simulator's builds are
/// seconds old).
async fn prune(cluster: &Cluster, args: &[&str]) -> CliRun {
    let mut all = vec!["prune", "--keep-younger-than", "0s"];
    all.extend_from_slice(args);
    BIN.cli()
        .args(&all)
        .kubeconfig(cluster.cp.kubeconfig())
        .run_async()
        .await
}

/// MOSC worker layered and settled on its first build, then each of `configs` rendered and
/// rolled out in turn: the builds, oldest first.
async fn settle_through(cluster: &Cluster, configs: &[&str]) -> Vec<Build> {
    settle_pushing_to(cluster, &cluster.push_spec(), configs).await
}

/// [`settle_through`] with MOSC worker pushing to `push_spec`.
async fn settle_pushing_to(cluster: &Cluster, push_spec: &str, configs: &[&str]) -> Vec<Build> {
    create_mosc(&cluster.client, "worker", push_spec)
        .await
        .expect("create MOSC");
    let first = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("first build");
    wait_rolled_out(cluster, &first.image).await;
    let mut builds = vec![first];
    for config in configs {
        render(cluster, config).await;
        let previous = &builds[builds.len() - 1].image;
        let next = wait_new_build(cluster, previous).await;
        wait_rolled_out(cluster, &next.image).await;
        builds.push(next);
    }
    builds
}

/// The builds listed under `key` of a JSON report.
fn builds_in(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}[]: {report:#}"))
        .iter()
        .map(|b| b["build"].as_str().expect("build").to_string())
        .collect()
}

/// The builds `--apply` deleted.
fn deleted(report: &Value) -> Vec<String> {
    report["applied"]
        .as_array()
        .unwrap_or_else(|| panic!("applied[]: {report:#}"))
        .iter()
        .filter(|a| a["outcome"] == "deleted")
        .map(|a| a["build"].as_str().expect("build").to_string())
        .collect()
}

fn mosbs(builds: &[&Build]) -> Vec<String> {
    builds.iter().map(|b| b.mosb.clone()).collect()
}

/// `kept[]`'s reasons for `build`.
fn reasons(report: &Value, build: &str) -> Vec<String> {
    report["kept"]
        .as_array()
        .expect("kept[]")
        .iter()
        .find(|k| k["build"] == build)
        .unwrap_or_else(|| panic!("{build} kept: {report:#}"))["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .map(|r| r.as_str().expect("reason").to_string())
        .collect()
}

/// Waits until MCO deleted `build`'s image from the registry.
async fn wait_gone(cluster: &Cluster, build: &Build) {
    let image = build.image_ref().expect("image");
    wait_image_gone(
        cluster,
        &image,
        &format!("the image of {} to go", build.mosb),
    )
    .await;
}

/// Whether `image` is in the registry now.
async fn in_registry(cluster: &Cluster, image: &str) -> bool {
    let image = ImageRef::parse(image).expect("image");
    let digest = image.digest.clone().expect("digest");
    cluster
        .registry
        .manifest_status(&image.repo, &digest)
        .await
        .expect("registry")
        .is_none()
}
