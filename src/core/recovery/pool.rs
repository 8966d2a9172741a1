//! When MCO has finished a pool a recovered node was in, for `recover --wait`: `Updated` for a
//! pool without a MachineOSConfig, the rollout resumed for one a MachineOSConfig targets (it
//! builds and rolls on once the admin unpauses it).

use crate::core::model::MachineConfigPool;

/// Where a pool stands for `recover --wait`.
#[derive(Debug, PartialEq, Eq)]
pub enum PoolState {
    /// Finished: the outcome's name (`updated`, `rolloutResumed`) and why.
    Finished(&'static str, String),
    /// Not yet: what it waits for, in words.
    Waiting(String),
}

/// Whether MCO finished `pool`: `Updated=True` (and no node degraded); for a pool a
/// MachineOSConfig targets, its rollout resumed (unpaused, `Updating` or `Updated`, no node
/// degraded). Otherwise what it waits for, in words.
pub fn pool_state(pool: &MachineConfigPool, config: Option<&str>) -> PoolState {
    let condition = |t: &str| {
        pool.status
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.as_str())
    };
    let degraded = condition("NodeDegraded") == Some("True");
    let updated = condition("Updated") == Some("True");
    let updating = condition("Updating") == Some("True");
    let counts = format!(
        "{} of {} machines updated, NodeDegraded={}",
        pool.status.updated_machine_count.unwrap_or(0),
        pool.status.machine_count.unwrap_or(0),
        condition("NodeDegraded").unwrap_or("<none>")
    );
    let name = pool.name();
    match config {
        Some(config) if pool.is_paused() => PoolState::Waiting(format!(
            "paused, and MachineOSConfig {config} targets it: waiting until you unpause it \
             (oc patch mcp {name} --type=merge -p '{{\"spec\":{{\"paused\":false}}}}', once its \
             build is current) and its rollout resumes ({counts})"
        )),
        Some(config) if !degraded && (updating || updated) => PoolState::Finished(
            "rolloutResumed",
            format!("the rollout of MachineOSConfig {config} resumed ({counts})"),
        ),
        Some(config) => PoolState::Waiting(format!(
            "waiting for the rollout of MachineOSConfig {config} to resume ({counts})"
        )),
        None if pool.is_paused() => PoolState::Waiting(format!(
            "paused: waiting until you unpause it (oc patch mcp {name} --type=merge -p \
             '{{\"spec\":{{\"paused\":false}}}}') and MCO finishes it ({counts})"
        )),
        None if updated && !degraded => {
            PoolState::Finished("updated", format!("Updated=True ({counts})"))
        }
        None => PoolState::Waiting(format!("waiting for Updated=True ({counts})")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(paused: bool, conditions: &[(&str, &str)]) -> MachineConfigPool {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(t, s)| json!({"type": t, "status": s}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "worker"},
            "spec": {"paused": paused},
            "status": {"conditions": conditions, "machineCount": 3, "updatedMachineCount": 3},
        }))
        .expect("pool decodes")
    }

    fn outcome(state: PoolState) -> Option<&'static str> {
        match state {
            PoolState::Finished(outcome, _) => Some(outcome),
            PoolState::Waiting(_) => None,
        }
    }

    #[test]
    fn a_pool_is_finished_as_mco_reports_it() {
        let updated = [("Updated", "True"), ("NodeDegraded", "False")];
        let updating = [("Updating", "True"), ("NodeDegraded", "False")];
        let degraded = [("Updated", "True"), ("NodeDegraded", "True")];
        let cases: [(&str, MachineConfigPool, Option<&str>, Option<&str>); 8] = [
            ("updated", pool(false, &updated), None, Some("updated")),
            ("still degraded", pool(false, &degraded), None, None),
            ("updating, no config", pool(false, &updating), None, None),
            ("paused, no config", pool(true, &updated), None, None),
            (
                "config, rolling",
                pool(false, &updating),
                Some("worker"),
                Some("rolloutResumed"),
            ),
            (
                "config, updated",
                pool(false, &updated),
                Some("worker"),
                Some("rolloutResumed"),
            ),
            ("config, paused", pool(true, &updated), Some("worker"), None),
            (
                "config, degraded",
                pool(false, &degraded),
                Some("worker"),
                None,
            ),
        ];
        for (what, pool, config, want) in cases {
            assert_eq!(outcome(pool_state(&pool, config)), want, "{what}");
        }
        match pool_state(&pool(true, &updated), Some("worker")) {
            PoolState::Waiting(why) => assert!(why.contains("until you unpause it"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
