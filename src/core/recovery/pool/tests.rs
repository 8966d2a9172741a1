use serde_json::{Value, json};

use super::*;

const R2: &str = "rendered-worker-2";
const IMAGE: &str = "registry.example.com/ocb@sha256:bbbb";

fn pool(paused: bool, conditions: &[(&str, &str)]) -> MachineConfigPool {
    let conditions: Vec<_> = conditions
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "spec": {"paused": paused, "configuration": {"name": R2}},
        "status": {"conditions": conditions, "machineCount": 3, "updatedMachineCount": 1},
    }))
    .expect("pool decodes")
}

fn configs() -> Vec<Arc<MachineOSConfig>> {
    vec![Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}},
            "status": {"currentImagePullSpec": IMAGE}}))
        .expect("mosc"),
    )]
}

fn build(condition: Option<&str>, image: &str) -> Vec<Arc<MachineOSBuild>> {
    let conditions: Vec<Value> = condition
        .map(|c| json!({"type": c, "status": "True"}))
        .into_iter()
        .collect();
    vec![Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "worker-b"},
            "spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": R2}},
            "status": {"digestedImagePushSpec": image, "conditions": conditions}}))
        .expect("mosb"),
    )]
}

fn outcome(state: PoolState) -> Option<&'static str> {
    match state {
        PoolState::Finished(outcome, _) => Some(outcome),
        PoolState::Waiting(_) => None,
    }
}

#[test]
fn a_pool_without_a_machine_os_config_is_finished_when_updated() {
    let updated = [("Updated", "True"), ("NodeDegraded", "False")];
    let updating = [("Updating", "True"), ("NodeDegraded", "False")];
    let degraded = [("Updated", "True"), ("NodeDegraded", "True")];
    let cases = [
        ("updated", pool(false, &updated), Some("updated")),
        ("still degraded", pool(false, &degraded), None),
        ("updating", pool(false, &updating), None),
        ("paused", pool(true, &updated), None),
    ];
    for (what, pool, want) in cases {
        assert_eq!(outcome(pool_state(&pool, &[], &[])), want, "{what}");
    }
}

/// What, the pool, its builds, the outcome.
type Case = (
    &'static str,
    MachineConfigPool,
    Vec<Arc<MachineOSBuild>>,
    Option<&'static str>,
);

/// MCO says `Updating=True` on every unpaused pool not yet updated, also "waiting for a new
/// OS image build to start": the rollout resumed only once its build runs or MCO sends the
/// image again.
#[test]
fn a_layered_pool_has_resumed_only_once_its_build_runs_or_its_image_is_sent() {
    let updating = [("Updating", "True"), ("NodeDegraded", "False")];
    let updated = [("Updated", "True"), ("NodeDegraded", "False")];
    let degraded = [("Updating", "True"), ("NodeDegraded", "True")];
    let other = "registry.example.com/ocb@sha256:aaaa";
    let cases: Vec<Case> = vec![
        (
            "no build yet: waiting for one to start",
            pool(false, &updating),
            vec![],
            None,
        ),
        (
            "its build running",
            pool(false, &updating),
            build(None, ""),
            Some("rolloutResumed"),
        ),
        (
            "its build current: nodes sent",
            pool(false, &updating),
            build(Some("Succeeded"), IMAGE),
            Some("rolloutResumed"),
        ),
        (
            "succeeded, the config not pointed at it yet",
            pool(false, &updating),
            build(Some("Succeeded"), other),
            None,
        ),
        (
            "its build failed",
            pool(false, &updating),
            build(Some("Failed"), ""),
            None,
        ),
        (
            "updated",
            pool(false, &updated),
            vec![],
            Some("rolloutResumed"),
        ),
        (
            "degraded",
            pool(false, &degraded),
            build(Some("Succeeded"), IMAGE),
            None,
        ),
        (
            "paused",
            pool(true, &updated),
            build(Some("Succeeded"), IMAGE),
            None,
        ),
    ];
    for (what, pool, builds, want) in cases {
        assert_eq!(
            outcome(pool_state(&pool, &configs(), &builds)),
            want,
            "{what}"
        );
    }
    match pool_state(&pool(true, &updated), &configs(), &[]) {
        PoolState::Waiting(why) => assert!(why.contains("until you unpause it"), "{why}"),
        other => panic!("{other:?}"),
    }
    match pool_state(
        &pool(false, &updating),
        &configs(),
        &build(Some("Failed"), ""),
    ) {
        PoolState::Waiting(why) => assert!(why.contains("rebuild"), "{why}"),
        other => panic!("{other:?}"),
    }
}
