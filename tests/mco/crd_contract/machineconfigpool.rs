//! MachineConfigPool: required spec, label selectors, synchronizer counts.

use serde_json::{Value, json};

use super::{Api, Case, Op, with};

pub(crate) fn pool(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}
    })
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        (
            "MCP without spec",
            Op::Create(with(pool("p1"), "/spec", Value::Null)),
            "spec: Required value",
        ),
        (
            "MCP selector expression without operator",
            Op::Create(with(
                pool("p2"),
                "/spec/nodeSelector",
                json!({"matchExpressions": [{"key": "a"}]}),
            )),
            "spec.nodeSelector.matchExpressions[0].operator: Required value",
        ),
        (
            "MCP synchronizer with more updated than machines",
            Op::Status(
                pool("p3"),
                json!({"poolSynchronizersStatus": [{"poolSynchronizerType": "PinnedImageSets", "machineCount": 1, "updatedMachineCount": 2, "readyMachineCount": 0, "availableMachineCount": 0, "unavailableMachineCount": 0}]}),
            ),
            "machineCount must be greater than or equal to updatedMachineCount",
        ),
        (
            "MCP synchronizer with more ready than available",
            Op::Status(
                pool("p4"),
                json!({"poolSynchronizersStatus": [{"poolSynchronizerType": "PinnedImageSets", "machineCount": 3, "updatedMachineCount": 0, "readyMachineCount": 2, "availableMachineCount": 1, "unavailableMachineCount": 0}]}),
            ),
            "availableMachineCount must be greater than or equal to readyMachineCount",
        ),
    ]
}

/// A pool with MCO's condition list passes (not keyed: the list is atomic).
pub(crate) async fn accepted(api: &Api) {
    // A pool with MCO's condition list (not keyed: the list is atomic).
    let p = pool("worker");
    api.create(&p).await.expect("MCP create");
    api.status(&p, &json!({"machineCount": 3, "updatedMachineCount": 1, "readyMachineCount": 1,
                            "unavailableMachineCount": 1, "degradedMachineCount": 0,
                            "conditions": [{"type": "Updating", "status": "True", "reason": "",
                                            "message": "Pool is waiting for OS image build to complete (mosb: worker-1)",
                                            "lastTransitionTime": "2026-11-30T10:00:00Z"}]}))
        .await
        .expect("MCP status");
}
