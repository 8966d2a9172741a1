//! The defer-mode finalizer controller, end to end on a real API server: it starts only once
//! every cache has synced, and an update the API server refuses as Invalid is backed off and
//! reported rather than retried like a conflict.
//!
//! Each test starts its own control plane and guard and stops them.

use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use serde_json::json;

use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco;
use testkit::scenario::{create_mosc, finalizers, wait_for, wait_for_events_about};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// The finalizer controller starts only once every cache has synced (its decisions read
/// pools and MachineOSConfigs). With the MachineConfigPool CRD missing, the pool cache cannot
/// list: the guard leads (it holds the Lease) but adds no finalizer and says why; once the CRD
/// is back, the caches sync and the controller adopts the MachineOSConfig.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_controller_waits_for_the_caches_to_sync() {
    let cp = ControlPlane::start().await.expect("control plane");
    cp.remove_crd("machineconfigpools.machineconfiguration.openshift.io")
        .await
        .expect("CRD deleted");
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");

    let guard = BIN
        .serve(&cp)
        .args(&["--deletion-mode=defer", "--lease-namespace=default"])
        .spawn()
        .expect("spawn guard");
    guard
        .wait_status("/readyz", 503, Duration::from_secs(30))
        .await
        .expect("serving, not ready");
    wait_for(
        || async { Ok((guard.metric("mosc_guard_leader").await == Some(1.0)).then_some(())) },
        Duration::from_secs(30),
        "the guard to hold the Lease",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    // Leading, not synced: the controller says it waits, and nothing is written. Its cache of
    // MachineOSConfigs has worker (a controller that did not wait would have it to adopt).
    guard
        .wait_log_line(
            &["finalizer controller waiting for the caches to sync"],
            Duration::from_secs(30),
        )
        .await
        .expect("the controller waits for the caches");
    guard
        .wait_counter_above(
            "mosc_guard_cache_objects{cache=\"machineosconfigs\"}",
            0.0,
            Duration::from_secs(30),
        )
        .await
        .expect("the MachineOSConfig cache holds worker");
    let mosc = mco::moscs(&cp.client()).get("worker").await.expect("get");
    assert!(
        finalizers(&mosc).is_empty(),
        "no finalizer before the caches synced\n{}",
        guard.log_tail(40)
    );
    let log = guard.log();
    assert!(!log.contains("finalizer controller starting"), "{log}");

    cp.restore_crd("machineconfigpools.yaml")
        .await
        .expect("CRD restored");
    guard
        .wait_status("/readyz", 200, Duration::from_secs(90))
        .await
        .expect("ready once the CRD exists");
    wait_for(
        || async {
            let mosc = mco::moscs(&cp.client()).get("worker").await?;
            Ok(finalizers(&mosc)
                .iter()
                .any(|f| f == FINALIZER)
                .then_some(()))
        },
        Duration::from_secs(30),
        "the controller to adopt the MachineOSConfig",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    assert!(
        guard
            .log()
            .contains("caches synced; finalizer controller starting")
    );
}

/// An update the API server refuses as Invalid (422) is not retried like a conflict
/// every 200 ms: the controller backs off and reports it, with a `FinalizerUpdateFailed`
/// Warning Event and `mosc_guard_controller_errors_total{error="invalid"}`. A
/// ValidatingAdmissionPolicy refuses adding mosc-guard's finalizer, so the defer-mode
/// controller's adoption of the MachineOSConfig fails with 422 on an unchanged object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_finalizer_update_backs_off_and_is_reported() {
    let cp = ControlPlane::start().await.expect("control plane");
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");
    testkit::users::apply(
        &cp,
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-guard-finalizer}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [machineconfiguration.openshift.io]
      apiVersions: ["*"]
      operations: [UPDATE]
      resources: [machineosconfigs]
  validations:
  - expression: "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'mosc-guard.dev/wait-for-rollout')"
    message: this cluster does not allow the mosc-guard finalizer
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-guard-finalizer}
spec:
  policyName: no-guard-finalizer
  validationActions: [Deny]
"#,
    )
    .await
    .expect("policy");
    // In effect once an admin's (dry-run) attempt is refused with 422.
    wait_for(
        || async {
            let params = PatchParams {
                dry_run: true,
                ..Default::default()
            };
            let patch = Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}}));
            match mco::moscs(&cp.client())
                .patch("worker", &params, &patch)
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 422 => Ok(Some(())),
                _ => Ok(None),
            }
        },
        Duration::from_secs(30),
        "the admission policy to be in effect",
    )
    .await
    .expect("policy in effect");

    let guard = BIN
        .serve(&cp)
        .args(&["--deletion-mode=defer", "--lease-namespace=default"])
        .start()
        .await
        .expect("guard");
    let event = wait_for_events_about(
        &cp.client(),
        "MachineOSConfig",
        "worker",
        "FinalizerUpdateFailed",
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(30)))
    .remove(0);
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("does not allow the mosc-guard finalizer"),
        "{note}"
    );
    // Backoff 1, 2, 4 s, not a retry every 200 ms as after a conflict. Timed between
    // attempts the guard counts: seen at n (so attempt n+1 had not happened yet), then at
    // n+2, which is at least the whole pause after attempt n+1 later: 2 s or more (0.4 s if
    // retried like a conflict).
    let invalid = "mosc_guard_controller_errors_total{error=\"invalid\"}";
    let seen = guard
        .wait_counter_above(invalid, 0.0, Duration::from_secs(30))
        .await
        .expect("the invalid updates are counted");
    let since = Instant::now();
    let later = guard
        .wait_counter_above(invalid, seen + 1.0, Duration::from_secs(60))
        .await
        .expect("the invalid update is retried");
    let took = since.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "backed off, not retried at once: attempts {seen} to {later} within {took:?}\n{}",
        guard.log_tail(30)
    );
    let mosc = mco::moscs(&cp.client()).get("worker").await.expect("get");
    assert!(finalizers(&mosc).is_empty());
}
