//! Readiness of the `mosc-guard serve` process against a real API server: `/readyz` waits for
//! every cache and a missing CRD is retried rather than fatal; a watch that keeps failing makes
//! the guard unready, naming the cache, and nothing is allowed from the stale cache meanwhile.
//!
//! Each test starts its own control plane and guard and stops them.

use std::time::{Duration, Instant};

use testkit::controlplane::ControlPlane;
use testkit::guard::{Guard, GuardBin};
use testkit::scenario::dry_run_delete;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_every_cache_and_a_missing_crd_is_retried() {
    let cp = ControlPlane::start().await.expect("control plane");
    let guard = guard_without_builds(&cp).await;
    // Several seconds without the MOSB API: alive, not ready, saying why in the log.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(guard.status("/readyz").await, Some(503), "{}", guard.log());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let metrics = guard.metrics().await.expect("metrics");
    assert!(metrics.contains("mosc_guard_ready 0"), "{metrics}");
    let log = guard.log();
    assert!(
        log.contains("watch failed") && log.contains("machineosbuilds"),
        "{log}"
    );

    cp.restore_crd("machineosbuilds.yaml")
        .await
        .expect("CRD restored");
    guard
        .wait_status("/readyz", 200, Duration::from_secs(90))
        .await
        .expect("mosc-guard becomes ready once the CRD exists");
}

/// Removes the MachineOSBuild CRD, then starts a guard and waits until it serves `/healthz`.
async fn guard_without_builds(cp: &ControlPlane) -> Guard {
    cp.remove_crd("machineosbuilds.machineconfiguration.openshift.io")
        .await
        .expect("CRD deleted");
    let guard = BIN.serve(cp).spawn().expect("spawn guard");
    guard
        .wait_status("/healthz", 200, Duration::from_secs(30))
        .await
        .expect("mosc-guard serves /healthz");
    guard
}

/// A confirming read that finds a kind every decision reads answering 404 cannot tell, and the
/// guard refuses: an API server that just started can answer 404 for a custom resource it serves
/// (kubernetes/kubernetes#115241), and builds read as none would guard no image. Here the
/// MachineOSBuild CRD is gone while a MachineOSConfig is deleted (no node needs anything: the
/// only reason to refuse is the read); once it is back, the same deletion is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_answering_404_is_not_read_as_none() {
    let cp = ControlPlane::start().await.expect("control plane");
    let image = testkit::scenario::objects::image("ab");
    testkit::scenario::objects::create_built_mosc(&cp.client(), "worker", &image)
        .await
        .expect("built MachineOSConfig");
    let guard = guard_without_builds(&cp).await;
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    let refused = dry_run_delete(&cp.client(), "worker")
        .await
        .expect_err("builds not served: the deletion cannot be verified");
    assert!(
        refused.contains(testkit::scenario::REFUSED_BY_GUARD)
            && refused.contains("could not verify")
            && refused.contains("404")
            && refused.contains("machineosbuilds"),
        "{refused}\n{}",
        guard.log_tail(40)
    );

    cp.restore_crd("machineosbuilds.yaml")
        .await
        .expect("CRD restored");
    testkit::scenario::wait_for(
        || async { Ok(dry_run_delete(&cp.client(), "worker").await.ok()) },
        Duration::from_secs(60),
        "the same deletion allowed once builds are served again",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
}

/// RBAC of the guard's user `guard`, minus MachineConfigPools, which the binding `guard-pools`
/// grants separately (deleted and re-applied by the test).
const GUARD_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guard-base}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds]
  verbs: [get, list, watch, patch]
- apiGroups: [config.openshift.io]
  resources: [clusterversions]
  verbs: [get, list, watch]
- apiGroups: [machine.openshift.io]
  resources: [machines]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guard-base}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-base}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: guard}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guard-pools}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigpools]
  verbs: [get, list, watch]
"#;

const GUARD_POOLS_BINDING: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guard-pools}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-pools}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: guard}
"#;

/// Waits until `kubectl auth can-i list machineconfigpools --as guard` answers `allowed`.
async fn wait_guard_may_list_pools(cp: &ControlPlane, allowed: bool) {
    testkit::users::wait_can_i(cp, "list", "machineconfigpools", "guard", allowed)
        .await
        .expect("the pools grant in effect");
}

/// A watch that keeps failing makes the guard unready, naming the cache, and no allow
/// is decided from the stale cache meanwhile; it recovers on its own.
///
/// The guard runs as user `guard` and reaches the API server through a forwarder. Its grant on
/// MachineConfigPools is revoked mid-run; an established watch is not cut by an RBAC change,
/// so the forwarder then drops the guard's connections (as an API server restart would): every
/// watch reconnects, and the pools watch fails with 403 from then on. Meanwhile the pool is
/// unpaused, so MCO would send its node to the MachineOSConfig's image, which the stale pool
/// cache (still paused) cannot see: a deletion must not be allowed from it. Restoring the grant
/// brings the watch, readiness and the rolling pool's denial back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_watch_drops_readiness_and_never_allows_from_the_stale_cache() {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    testkit::scenario::create_pool(&client, "worker", "node-role.kubernetes.io/worker", 1)
        .await
        .expect("pool");
    // One worker not on the image yet: once the pool is unpaused, MCO sends it there next.
    testkit::scenario::create_nodes(
        &client,
        &testkit::scenario::node_names(1),
        testkit::scenario::WORKER_ROLE_LABEL,
        &testkit::scenario::rendered_config("worker"),
    )
    .await
    .expect("node");
    testkit::scenario::objects::set_pool_paused(&client, "worker", true)
        .await
        .expect("pool paused");
    let image = testkit::scenario::objects::image("ab");
    testkit::scenario::objects::create_built_mosc(&client, "worker", &image)
        .await
        .expect("built MachineOSConfig");
    testkit::users::apply(&cp, GUARD_RBAC).await.expect("RBAC");
    testkit::users::apply(&cp, GUARD_POOLS_BINDING)
        .await
        .expect("pools grant");
    wait_guard_may_list_pools(&cp, true).await;

    let forwarder = testkit::forwarder::Forwarder::to_apiserver(&cp)
        .await
        .expect("forwarder");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        testkit::users::kubeconfig_via(&cp, "guard", dir.path(), &forwarder.https_url())
            .expect("kubeconfig");
    let guard = BIN
        .serve(&cp)
        .kubeconfig(&kubeconfig)
        .args(&["--stale-after=5", "--lease-namespace=default"])
        .spawn()
        .expect("spawn guard");
    guard
        .wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("ready");
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    dry_run_delete(&cp.client(), "worker")
        .await
        .expect("paused pool, no node sent to the image: the deletion is allowed");

    // Revoke the pools grant, then cut the guard's connections so its watches reconnect.
    let out = cp
        .kubectl(["delete", "clusterrolebinding", "guard-pools"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    wait_guard_may_list_pools(&cp, false).await;
    forwarder.cut_connections();
    guard
        .wait_status("/readyz", 503, Duration::from_secs(60))
        .await
        .expect("not ready once the pools watch has failed for --stale-after");
    let (_, why) = guard.get("/readyz").await.expect("readyz");
    assert!(
        why.contains("machineconfigpools"),
        "names the cache: {why}\n{}",
        guard.log_tail(60)
    );
    assert!(why.contains("forbidden"), "says why: {why}");
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"machineconfigpools\"}")
            .await,
        Some(1.0)
    );
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"nodes\"}")
            .await,
        Some(0.0),
        "only the failing cache is stale"
    );
    assert_eq!(guard.metric("mosc_guard_ready").await, Some(0.0));

    // The pool is unpaused, so MCO sends the node to the image; the guard's pool cache cannot
    // see it.
    testkit::scenario::objects::set_pool_paused(&client, "worker", false)
        .await
        .expect("pool unpaused");
    let refused = dry_run_delete(&cp.client(), "worker")
        .await
        .expect_err("no allow from the stale pool cache");
    assert!(
        refused.contains("could not verify") || refused.contains("cannot be deleted"),
        "{refused}"
    );

    // Restore the grant: the watch recovers with its backoff, readiness comes back on its own.
    testkit::users::apply(&cp, GUARD_POOLS_BINDING)
        .await
        .expect("pools grant");
    wait_guard_may_list_pools(&cp, true).await;
    guard
        .wait_status("/readyz", 200, Duration::from_secs(90))
        .await
        .expect("ready again once the watch recovers");
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"machineconfigpools\"}")
            .await,
        Some(0.0)
    );
    assert!(
        guard.log().contains("watch recovered"),
        "{}",
        guard.log_tail(30)
    );
    let refused = dry_run_delete(&cp.client(), "worker")
        .await
        .expect_err("the pool is rolling out the image");
    assert!(refused.contains("rolling out"), "{refused}");
    // No decision allowed anything between the revocation and now.
    let log = guard.log();
    let allowed = log
        .lines()
        .filter(|l| l.contains("admission decision") && l.contains("result=allowed"))
        .count();
    assert_eq!(
        allowed, 1,
        "only the first deletion, of the paused pool, was allowed:\n{log}"
    );
}
