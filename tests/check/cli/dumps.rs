//! Must-gather dumps: a config pointing at an image no node has yet, a dump that cannot be read
//! whole, and copies that disagree.

use super::*;

/// The state the one degraded trial of the race soak hit (RELIABILITY.md, section 1): MCO has
/// pointed the MachineOSConfig at a newly built image that no node runs or was sent to yet, and
/// the pool still reports `Updated` from the previous rollout (its next status pass turns it
/// `Updating`). Deleting the MachineOSConfig now lets MCO's node controller, still holding it in
/// its cache, send nodes to the image the cleanup deletes: blocked, whatever the pool reports.
#[test]
fn a_config_pointing_at_an_image_no_node_has_yet_is_not_deletable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = |c: char| format!("registry.example/ocb@sha256:{}", c.to_string().repeat(64));
    let (old, new) = (image('a'), image('b'));
    let node = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/desiredImage": old,
                "machineconfiguration.openshift.io/currentImage": old,
                "machineconfiguration.openshift.io/state": "Done"}}})
    };
    let build = |name: &str, image: &str| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/machine-os-config": "worker"}},
            "spec": {"machineOSConfig": {"name": "worker"}},
            "status": {"digestedImagePushSpec": image}})
    };
    let pool = |paused: bool| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
         "metadata": {"name": "worker"},
         "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}, "paused": paused},
         "status": {"machineCount": 2, "updatedMachineCount": 2, "conditions": [
             {"type": "Updated", "status": "True"}, {"type": "Updating", "status": "False"}]}})
    };
    let write = |paused: bool| {
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            pool(paused),
            {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
             "metadata": {"name": "worker",
                          "annotations": {"machineconfiguration.openshift.io/current-machine-os-build": "worker-new"}},
             "spec": {"machineConfigPool": {"name": "worker"},
                      "renderedImagePushSpec": "registry.example/ocb:latest"},
             "status": {"currentImagePullSpec": new}},
            build("worker-old", &old),
            build("worker-new", &new),
            node("node-0"),
            node("node-1"),
        ]});
        fs::write(dir.path().join("dump.json"), objects.to_string()).expect("write dump");
    };

    write(false);
    let run = check_dir(dir.path(), "machineosconfig/worker", &["--output", "json"]);
    assert_eq!(
        run.code,
        Some(1),
        "the pool is about to roll out {new}: {run:?}"
    );
    let report = run.json();
    assert_eq!(report["rollingPools"][0]["pool"], "worker", "{run:?}");
    assert_eq!(report["rollingPools"][0]["pendingNodes"], 2, "{run:?}");
    assert_eq!(report["rollingPools"][0]["updatedMachines"], 2, "{run:?}");
    let run = check_dir(dir.path(), "machineosconfig/worker", &[]);
    assert!(
        run.stdout.contains(
            "(pool status: 2 of 2 machines updated): 2 nodes do not run it yet: node-0, node-1"
        ),
        "{run:?}"
    );
    assert!(run.stdout.contains("oc patch mcp worker"), "{run:?}");

    // Paused, MCO sends no node to it: the deletion is safe, as the denial says.
    write(true);
    let run = check_dir(dir.path(), "machineosconfig/worker", &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// A dump with one object of each kind the policy reads, as a must-gather lays it out.
fn small_dump(dir: &Path) {
    let at = |rel: &str, text: &str| {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    };
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigpools/worker.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n\
         spec:\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n",
    );
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineosconfigs/worker.yaml",
        &format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSConfig\nmetadata:\n  name: worker\n  uid: u-1\n\
             spec:\n  machineConfigPool:\n    name: worker\nstatus:\n  currentImagePullSpec: {IMAGE}\n"
        ),
    );
    at(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineosbuilds/worker-1.yaml",
        &format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSBuild\nmetadata:\n  name: worker-1\n\
             \x20 labels:\n    machineconfiguration.openshift.io/machine-os-config: worker\n\
             \x20   machineconfiguration.openshift.io/target-machine-config-pool: worker\n\
             \x20 ownerReferences:\n  - {{apiVersion: machineconfiguration.openshift.io/v1, kind: MachineOSConfig, name: worker, uid: u-1, controller: true}}\n\
             spec:\n  machineOSConfig:\n    name: worker\nstatus:\n  digestedImagePushSpec: {IMAGE}\n"
        ),
    );
    for (name, current) in [("w-0", IMAGE), ("w-1", IMAGE)] {
        at(
            &format!("cluster-scoped-resources/core/nodes/{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    node-role.kubernetes.io/worker: \"\"\n\
                 \x20 annotations:\n    machineconfiguration.openshift.io/desiredImage: {IMAGE}\n\
                 \x20   machineconfiguration.openshift.io/currentImage: {current}\n"
            ),
        );
    }
}

#[test]
fn a_dump_that_cannot_be_read_whole_is_an_error_unless_allowed() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_dump(dir.path());
    let settled = check_dir(dir.path(), "worker", &[]);
    assert_eq!(settled.code, Some(0), "{settled:?}");

    // A node cut short: the one node that may still need the image could be in it.
    let node = dir
        .path()
        .join("cluster-scoped-resources/core/nodes/w-1.yaml");
    let text = fs::read_to_string(&node).expect("read");
    let cut = text.find("currentImage").expect("annotation") + "currentIm".len();
    fs::write(&node, &text[..cut]).expect("truncate");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.contains("is incomplete"), "{run:?}");
    assert!(
        run.stderr
            .contains("cluster-scoped-resources/core/nodes/w-1.yaml"),
        "{run:?}"
    );
    assert!(run.stderr.contains("--allow-incomplete"), "{run:?}");

    // --allow-incomplete decides on the rest and lists what it could not read.
    let run = check_dir(dir.path(), "worker", &["--allow-incomplete", "-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let warnings = run.json()["warnings"].clone();
    assert!(
        warnings.as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("nodes/w-1.yaml")))),
        "{run:?}"
    );

    // Nodes but no pools: membership, and so the pool rule, cannot be decided.
    small_dump(dir.path());
    fs::remove_file(dir.path().join(
        "cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigpools/worker.yaml",
    ))
    .expect("remove pool");
    let run = check_dir(dir.path(), "worker", &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("2 Nodes but no MachineConfigPools"),
        "{run:?}"
    );
}

#[test]
fn disagreeing_copies_give_the_most_cautious_verdict() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_dump(dir.path());
    // A second copy of w-1, from `oc get -o yaml` without a resourceVersion: still updating.
    let node = fs::read_to_string(
        dir.path()
            .join("cluster-scoped-resources/core/nodes/w-1.yaml"),
    )
    .expect("read");
    let updating = node.replace(
        &format!("currentImage: {IMAGE}"),
        "currentImage: registry.example/old@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    );
    fs::write(dir.path().join("extra-w-1.yaml"), updating).expect("write");
    let run = check_dir(dir.path(), "worker", &["-o", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(blocking_names(&run.json()), ["w-1"], "{run:?}");
    assert!(
        run.stderr
            .contains("the verdict is the most cautious of 2 combinations"),
        "{run:?}"
    );
}
