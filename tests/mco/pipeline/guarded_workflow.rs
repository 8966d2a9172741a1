//! Issue 25's workflow with the guard installed, deny mode and defer mode: pool `worker` is
//! rolling out build A's image X (the first worker held mid-update, the others not sent yet)
//! when a MachineConfig changes. Build B for the new rendered config starts (4.20 names it the
//! MOSC's current build at once, while the MOSC's image is still X) and fails; the admin fixes
//! the Containerfile, MCO creates C, and before starting it deletes B
//! (`deleteOtherBuildsForMachineOSConfig`, as the machine-os-builder). The workflow completes
//! as it does without the guard: C starts, the pool reaches C's image, none of MCO's requests
//! is refused, and the guard, which saw MCO's deletion of B through the observing webhook, had
//! nothing to refuse there. Meanwhile the MOSC's deletion is refused only for the node already
//! sent: MCO sends no further node while the new config's build has not succeeded. Installed as
//! OLM does (no matchConditions), MCO's requests reach the enforcing webhook and the guard
//! admits them itself.

use super::*;
use testkit::guard::GuardBin;
use testkit::release::Release;
use testkit::simulator::SimConfig;
use testkit::webhooks::{
    register_mutating_webhook, register_validating_webhook,
    register_validating_webhook_without_mco_exclusion,
};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// How the guard is registered: as the shipped manifests do (MCO kept out of the enforcing
/// webhook by a matchCondition, observed by a second one), or as OLM does (one webhook, no
/// matchConditions: the guard must admit MCO's requests by itself).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Install {
    Manifests,
    Olm,
}

/// The workflow on `release` with the guard serving `args` (and the mutating webhook in defer
/// mode).
async fn config_change_with_a_failing_build(
    release: Release,
    args: &[&str],
    defer: bool,
    install: Install,
) {
    let cluster = seed_on(release, SimConfig::fast()).await;
    let guard = BIN
        .serve(&cluster.cp)
        .args(args)
        .start()
        .await
        .expect("mosc-guard starts");
    match install {
        Install::Manifests => register_validating_webhook(&cluster.cp, &guard).await,
        Install::Olm => {
            register_validating_webhook_without_mco_exclusion(&cluster.cp, &guard).await
        }
    }
    .expect("validating webhook registered");
    if defer {
        register_mutating_webhook(&cluster.cp, &guard)
            .await
            .expect("mutating webhook registered");
    }
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("X is rolling out");
    let x = rollout.build.image.clone();

    // A MachineConfig changes mid-rollout: B, for R2, fails.
    fail_builds(&cluster, true);
    let b = render_r2(&cluster).await;
    wait_build_failed(&cluster, &b).await.expect("B fails");
    if release == Release::V4_20 {
        assert_eq!(
            current_build(&cluster, "worker").await.as_deref(),
            Some(b.as_str()),
            "4.20 names B current from its start"
        );
    }
    assert_eq!(
        current_image(&cluster, "worker").await.expect("MOSC"),
        Some(x.clone())
    );

    // What the guard says now: only the node MCO already sent blocks; no pool rule, because MCO
    // sends no further node to X while R2's build has not succeeded. B itself pushed nothing.
    let report = cluster.check(&BIN, "machineosconfig/worker", &["-o", "json"]);
    let report = report.json();
    assert_eq!(report["rollingPools"], serde_json::json!([]), "{report:#}");
    let blocking: Vec<&str> = report["blockingNodes"]
        .as_array()
        .expect("blockingNodes")
        .iter()
        .filter_map(|n| n["node"].as_str())
        .collect();
    assert_eq!(blocking, [rollout.node.as_str()], "{report:#}");
    let run = cluster.check(&BIN, &format!("machineosbuild/{b}"), &[]);
    assert_eq!(run.code, Some(0), "B guards nothing: {run:?}");

    // The fix: MCO deletes B before it starts C.
    fail_builds(&cluster, false);
    let c = fix_containerfile(&cluster, "tcpdump", &b).await;
    wait_build_job(&cluster, &c).await.expect("C starts");
    wait_build_gone(&cluster, &b).await;
    let fixed = wait_build_succeeded(&cluster, &c)
        .await
        .expect("C succeeds");
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &fixed.image).await;
    assert!(!watch.ever_degraded(), "pool worker degraded");
    assert_mco_never_refused(&cluster);

    // The guard saw MCO's deletion of B (through the observing webhook, or the only one as OLM
    // installs it) and admitted it with nothing to refuse; it would have refused none of MCO's
    // requests.
    let log = guard.log();
    let decided_b = log.lines().any(|l| {
        l.contains("admission decision")
            && l.contains(&format!("name={b}"))
            && l.contains("mco=true")
            && l.contains("result=allowed")
    });
    assert!(
        decided_b,
        "the guard decided MCO's deletion of {b}:\n{}",
        guard.log_tail(60)
    );
    let metrics = guard.metrics().await.expect("metrics");
    assert!(
        !metrics.contains("result=\"mco-would-deny\""),
        "nothing of MCO's would have been refused:\n{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_mode_on_4_20_lets_mcos_pipeline_supersede_a_failed_build() {
    config_change_with_a_failing_build(Release::V4_20, &[], false, Install::Manifests).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_mode_on_4_21_lets_mcos_pipeline_supersede_a_failed_build() {
    config_change_with_a_failing_build(
        Release::V4_21,
        &["--deletion-mode", "defer", "--lease-namespace", "default"],
        true,
        Install::Manifests,
    )
    .await;
}

/// Installed as OLM does, MCO's requests reach the enforcing webhook: the guard admits them by
/// their user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_without_match_conditions_the_guard_itself_admits_mcos_requests() {
    config_change_with_a_failing_build(Release::V4_20, &[], false, Install::Olm).await;
}
