//! A dump read for a recovery plan: each Node also as recovery reads it, the MachineConfigs'
//! names (their files now hold what the plan reads), disagreeing copies of a node named; and
//! nothing of it when the dump is read for the policy.

use super::*;
use crate::access::dump::Want;

fn machine_config(name: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
         name: {name}\nspec:\n  config:\n    ignition: {{version: 3.5.0}}\n"
    )
}

fn load_for(files: &[(&str, &str)], want: Want) -> Loaded {
    let dir = tree(files);
    load_dir_for(dir.path(), want).expect("directory loads")
}

const MC_DIR: &str = "mg/cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigs";

#[test]
fn recovery_reads_whole_nodes_and_machine_config_names() {
    let node = NODE.replace(
        "metadata:\n",
        "metadata:\n  annotations:\n    machineconfiguration.openshift.io/state: Degraded\n",
    ) + "spec:\n  unschedulable: true\nstatus:\n  nodeInfo:\n    bootID: b-1\n";
    let (rendered, base) = (
        format!("{MC_DIR}/rendered-worker-a.yaml"),
        format!("{MC_DIR}/00-worker.yaml"),
    );
    let (rendered_mc, base_mc) = (
        machine_config("rendered-worker-a"),
        machine_config("00-worker"),
    );
    let files = [
        (NODE_PATH, node.as_str()),
        ("mg/pools/worker.yaml", POOL),
        (rendered.as_str(), rendered_mc.as_str()),
        (base.as_str(), base_mc.as_str()),
    ];
    let loaded = load_for(&files, Want::Recovery);
    assert_eq!(loaded.incomplete, Vec::<String>::new());
    let recovery = loaded.recovery.expect("read for recovery");
    assert_eq!(recovery.nodes.len(), 1);
    assert_eq!(recovery.nodes[0].state(), Some("Degraded"));
    assert!(recovery.nodes[0].unschedulable);
    assert_eq!(recovery.nodes[0].boot_id.as_deref(), Some("b-1"));
    assert_eq!(
        recovery
            .machine_configs
            .map(|m| m.into_iter().collect::<Vec<_>>()),
        Some(vec![
            "00-worker".to_string(),
            "rendered-worker-a".to_string()
        ])
    );
    // The policy's snapshot is the same either way.
    assert_eq!(node_names(&loaded.snapshot.nodes), ["worker-a"]);
    let policy = load_for(&files, Want::Policy);
    assert!(policy.recovery.is_none());
    assert_eq!(node_names(&policy.snapshot.nodes), ["worker-a"]);
}

#[test]
fn a_broken_machine_config_file_is_a_gap_for_recovery_only() {
    let broken = format!("{MC_DIR}/rendered-worker-a.yaml");
    let files = [
        (NODE_PATH, NODE),
        ("mg/pools/worker.yaml", POOL),
        (broken.as_str(), "kind: MachineConfig\nmetadata: {name: x\n"),
    ];
    let recovery = load_for(&files, Want::Recovery);
    assert_eq!(recovery.incomplete.len(), 1, "{:?}", recovery.incomplete);
    assert!(
        recovery.incomplete[0].contains("(it holds MachineConfigs)"),
        "{:?}",
        recovery.incomplete
    );
    let policy = load_for(&files, Want::Policy);
    assert_eq!(policy.incomplete, Vec::<String>::new());
    assert_eq!(policy.warnings.len(), 1, "{:?}", policy.warnings);
}

#[test]
fn no_machine_configs_is_unknown_and_disagreeing_node_copies_are_named() {
    let degraded = NODE.replace(
        "metadata:\n",
        "metadata:\n  annotations:\n    machineconfiguration.openshift.io/state: Degraded\n",
    );
    let loaded = load_for(
        &[
            ("a/worker-a.yaml", NODE),
            ("b/worker-a.yaml", degraded.as_str()),
            ("mg/pools/worker.yaml", POOL),
        ],
        Want::Recovery,
    );
    let recovery = loaded.recovery.expect("read for recovery");
    assert_eq!(recovery.machine_configs, None);
    assert_eq!(
        recovery.disagreeing.into_iter().collect::<Vec<_>>(),
        ["worker-a"]
    );
}
