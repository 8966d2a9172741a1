//! Defer mode (`serve --deletion-mode defer`) on a real control plane, registry and the MCO
//! simulator (on 4.20): the mutating webhook adds the finalizer, the validating webhook accepts
//! the delete with a warning, and the finalizer controller (Lease holder only) removes the
//! finalizer from the MachineOSConfig once no node still needs its images.
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`: delete events handled 5 s late, builds of seconds).
//!
//! Each test starts its own control plane and guard(s) and stops them when it ends.
//!
//! One test binary: the defer-mode guard, the seeded cluster and the waits are here, the tests in
//! [`deferral`] (a deletion deferred until the rollout settles, the foreground cascade, the
//! mutating webhook), [`controller`] (start-up, restart, two replicas), [`lease`] (the leader
//! election alone, with skewed clocks and a holder cut off) and [`uninstall`]
//! (`mosc-guard remove-finalizers`).

mod controller;
mod deferral;
mod lease;
mod uninstall;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

use testkit::cli::CliRun;
use testkit::guard::{Guard, GuardBin};
use testkit::mco;
use testkit::scenario::{
    Cluster, DEFER, DegradedWatch, Rollout, STEP_TIMEOUT, assert_image_in_registry,
    create_infra_mosc, create_mosc, create_pool, deferral_warning, events_about, finalizers,
    kubectl, seed, wait_for, wait_image_and_builds_gone, wait_index_holds_the_rolling_node,
    wait_mosc_gone, wait_pool_reverted, wait_rolled_out,
};
use testkit::simulator::SimConfig;
use testkit::webhooks::register_webhooks;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// Starts a defer-mode guard with `extra` arguments.
async fn defer_guard(cluster: &Cluster, extra: &[&str]) -> Guard {
    let args: Vec<&str> = DEFER.iter().chain(extra).copied().collect();
    BIN.serve(&cluster.cp)
        .args(&args)
        .start()
        .await
        .expect("mosc-guard starts in defer mode")
}

/// Starts a defer-mode guard with `extra` arguments, logging mosc-guard's debug lines: the
/// positive signs (a controller pass that wrote nothing, a replica finding the Lease held) a
/// test waits for before asserting that nothing changed.
async fn defer_guard_debug(cluster: &Cluster, extra: &[&str]) -> Guard {
    let args: Vec<&str> = DEFER.iter().chain(extra).copied().collect();
    BIN.serve(&cluster.cp)
        .args(&args)
        .env("RUST_LOG", "info,mosc_guard=debug")
        .start()
        .await
        .expect("mosc-guard starts in defer mode")
}

/// A seeded cluster with a defer-mode guard registered, and the report's steps 1-3 done.
async fn deferring(timing: SimConfig) -> (Cluster, Guard, Rollout) {
    let cluster = seed(timing).await;
    let guard = defer_guard(&cluster, &[]).await;
    register_webhooks(&cluster.cp, &guard, true)
        .await
        .expect("webhooks registered");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    (cluster, guard, rollout)
}

async fn mosc(cluster: &Cluster, name: &str) -> Option<DynamicObject> {
    mco::moscs(&cluster.client)
        .get_opt(name)
        .await
        .expect("read MachineOSConfig")
}

async fn wait_finalizer(cluster: &Cluster, name: &str) {
    wait_for(
        || async {
            let obj = mco::moscs(&cluster.client).get_opt(name).await?;
            Ok(obj
                .filter(|o| finalizers(o).iter().any(|f| f == FINALIZER))
                .map(|_| ()))
        },
        STEP_TIMEOUT,
        &format!("MachineOSConfig {name} to carry {FINALIZER}"),
    )
    .await
    .expect("finalizer added");
}

async fn events(cluster: &Cluster, name: &str, reason: &str) -> Vec<Event> {
    events_about(&cluster.client, "MachineOSConfig", name, reason).await
}

async fn wait_event(cluster: &Cluster, name: &str, reason: &str) -> Event {
    wait_for(
        || async { Ok(events(cluster, name, reason).await.into_iter().next()) },
        STEP_TIMEOUT,
        &format!("a {reason} Event about {name}"),
    )
    .await
    .expect("event recorded")
}

/// Waits until the guard reports (via /metrics) whether it leads.
async fn wait_leader(guard: &Guard, leader: bool, timeout: Duration) {
    let want = format!("mosc_guard_leader {}", i32::from(leader));
    wait_for(
        || async {
            let text = guard.metrics().await?;
            Ok(text.lines().any(|l| l == want).then_some(()))
        },
        timeout,
        &format!("{} to report `{want}`", guard.base_url()),
    )
    .await
    .expect("leadership as expected");
}

/// `kubectl delete machineosconfig worker --wait=false` (+ `extra`) must succeed and print the
/// deferral warning naming the held node; returns kubectl's stderr.
async fn delete_deferred(cluster: &Cluster, rollout: &Rollout, extra: &[&str]) -> String {
    let mut args = vec!["delete", "machineosconfig", "worker", "--wait=false"];
    args.extend_from_slice(extra);
    let out = cluster.cp.kubectl(&args).await.expect("run kubectl delete");
    assert!(out.success(), "defer mode accepts the delete: {out:?}");
    let want = deferral_warning(rollout);
    assert!(
        out.stderr.contains(&want),
        "missing {want:?} in {}",
        out.stderr
    );
    out.stderr
}

/// Asserts MachineOSConfig `worker` is Terminating (deletionTimestamp set) and still holds our
/// finalizer.
async fn assert_held(cluster: &Cluster) {
    let obj = mosc(cluster, "worker").await.expect("worker still exists");
    assert!(obj.metadata.deletion_timestamp.is_some(), "Terminating");
    assert!(
        finalizers(&obj).iter().any(|f| f == FINALIZER),
        "held by {FINALIZER}"
    );
}

/// Runs a kubectl write and returns the finalizers of the object it wrote, as the API server
/// stored them (after the mutating webhook).
async fn finalizers_after<const N: usize>(cluster: &Cluster, args: [&str; N]) -> String {
    let mut with_output: Vec<&str> = args.to_vec();
    with_output.extend(["-o", "jsonpath={.metadata.finalizers}"]);
    let out = cluster.cp.kubectl(with_output).await.expect("kubectl runs");
    assert!(out.success(), "{out:?}");
    out.stdout.trim().to_owned()
}
