//! Issue 20, "every release with image mode": the report's scenario and a scale-up during the
//! deletion, on the releases whose machine-config-operator behaves differently
//! (`testkit::release`), each on a real control plane whose ClusterVersion says the release, a
//! real registry and the MCO simulator playing that release.
//!
//! - [`seed_guarded`]: the report's deletion refused by mosc-guard on 4.19, 4.21 and 4.23 (4.20
//!   is `tests/mco/seed_scenario`), then allowed once the rollout settled;
//! - [`seed_unguarded`]: the same deletion without the guard: the updating node fails
//!   "manifest unknown" on 4.19 and 4.21, while 4.23's in-use check keeps (and leaks) the image;
//!   4.19's cleanup by label deletes a build the MachineOSConfig does not control;
//! - [`joining_machines`]: a MachineSet scaling up while the MachineOSConfig is deleted, on 4.21
//!   (the Machine Config Server serves the layered image to the joining machine) and on 4.20
//!   (it does not: the control).
//!
//! Every test says its simulator timing in its doc comment. Each starts its own control plane
//! (a few seconds) and drops it at the end.

mod joining_machines;
mod seed_guarded;
mod seed_unguarded;

use serde_json::Value;
use testkit::guard::GuardBin;
use testkit::image_ref::ImageRef;
use testkit::release::Release;
use testkit::scenario::{Cluster, STEP_TIMEOUT, wait_for};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// The row of the guard's release table a release is decided with (`4.21` for 4.21.3).
fn rules_row(release: Release) -> String {
    let v = release.version();
    v.rsplit_once('.').map_or(v, |(minor, _)| minor).to_owned()
}

/// `mosc-guard check TARGET --output json EXTRA...` against the live cluster: its exit code and
/// its report.
fn check_json(cluster: &Cluster, target: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["--output", "json"];
    args.extend_from_slice(extra);
    let run = cluster.check(&BIN, target, &args);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("check {target} printed no JSON ({e}): {run:?}"));
    (run.code, report)
}

/// Asserts the guard decides with `release`'s rules, read from the cluster's ClusterVersion.
fn assert_guard_reads_release(cluster: &Cluster, release: Release) {
    let (_, report) = check_json(cluster, "machineosconfig/worker", &[]);
    assert_eq!(
        report["release"]["version"],
        release.version(),
        "the guard reads the ClusterVersion: {report:#}"
    );
    assert_eq!(
        report["release"]["rules"],
        serde_json::json!([rules_row(release)]),
        "{report:#}"
    );
}

/// Waits until MCO (the simulator) has deleted `image` from the registry.
async fn wait_image_deleted(cluster: &Cluster, image: &ImageRef) {
    let digest = image.digest.as_deref().expect("image has a digest");
    let what = format!(
        "{} to be deleted from the registry",
        image.with_digest(digest)
    );
    testkit::scenario::wait_image_gone(cluster, image, &what).await;
}

/// Waits until MachineOSBuild `name` is gone.
async fn wait_build_gone(cluster: &Cluster, name: &str) {
    testkit::scenario::wait_gone(&testkit::mco::mosbs(&cluster.client), name, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("MachineOSBuild {name} deleted: {e}"));
}

/// Waits until MCO's in-use check (4.23: whenever the build's pool exists) has kept `image`
/// from deletion.
async fn wait_image_kept(cluster: &Cluster, image: &str) {
    wait_for(
        || async {
            let kept = cluster.sim.kept_images();
            Ok(kept.iter().any(|i| i == image).then_some(()))
        },
        STEP_TIMEOUT,
        &format!("MCO's in-use check to keep {image}"),
    )
    .await
    .expect("image kept by the in-use check");
}
