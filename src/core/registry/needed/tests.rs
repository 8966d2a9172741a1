use super::*;
use serde_json::{Value, json};

const WORKER: &str = "node-role.kubernetes.io/worker";

fn image(name: &str) -> String {
    format!("quay.example/ocb/{name}@sha256:{}", "ab".repeat(32))
}

fn arc<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("fixture decodes"))
}

fn mosc(name: &str, current: &str) -> Arc<crate::core::model::MachineOSConfig> {
    arc(
        json!({"metadata": {"name": name}, "spec": {"machineConfigPool": {"name": name}},
            "status": {"currentImagePullSpec": current}}),
    )
}

fn build(name: &str, image: &str, succeeded: bool) -> Arc<crate::core::model::MachineOSBuild> {
    let status = if succeeded { "True" } else { "False" };
    arc(
        json!({"metadata": {"name": name}, "spec": {"machineOSConfig": {"name": "worker"}},
            "status": {"digestedImagePushSpec": image,
                "conditions": [{"type": "Succeeded", "status": status}]}}),
    )
}

fn pool() -> Arc<crate::core::model::MachineConfigPool> {
    arc(json!({"metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {WORKER: ""}}}}))
}

fn node(
    name: &str,
    worker: bool,
    desired: &str,
    current: &str,
) -> Arc<crate::core::node::NodeMeta> {
    let labels = if worker {
        json!({WORKER: ""})
    } else {
        json!({})
    };
    arc(
        json!({"metadata": {"name": name, "labels": labels, "annotations": {
            "machineconfiguration.openshift.io/desiredImage": desired,
            "machineconfiguration.openshift.io/currentImage": current}}}),
    )
}

#[test]
fn who_needs_what() {
    let (a, b, old, failed) = (image("a"), image("b"), image("old"), image("failed"));
    let snapshot = Snapshot {
        machine_os_configs: vec![mosc("worker", &b)],
        machine_os_builds: vec![
            build("worker-1", &old, true),
            build("worker-2", &b, true),
            build("worker-3", &failed, false),
        ],
        pools: vec![pool()],
        nodes: vec![
            node("w1", true, &b, &a),
            node("w2", true, &a, &a),
            node("stray", false, &a, &a),
        ],
        ..Default::default()
    };
    let needed = needed_images(&snapshot);
    let by: BTreeMap<&str, &NeededImage> = needed.iter().map(|n| (n.image.as_str(), n)).collect();
    assert_eq!(by.len(), 3, "{needed:?}");
    let nb = by[b.as_str()];
    assert_eq!(nb.pools().get("worker"), Some(&Need::Pending));
    assert!(nb.counts());
    assert_eq!(nb.needed_by.len(), 3, "w1 pending, the config, build 2");
    let na = by[a.as_str()];
    assert_eq!(na.pools().get("worker"), Some(&Need::Running));
    assert_eq!(na.need(), Some(Need::Running));
    assert!(na.needed_by.contains(&Holder::Node {
        node: "stray".into(),
        pool: None,
        need: Need::Running
    }));
    let no = by[old.as_str()];
    assert!(!no.counts());
    assert!(no.pools().is_empty());
    assert!(!by.contains_key(failed.as_str()));
}

#[test]
fn a_settled_pool_runs_its_config_image() {
    let b = image("b");
    let snapshot = Snapshot {
        machine_os_configs: vec![mosc("worker", &b)],
        pools: vec![pool()],
        nodes: vec![node("w1", true, &b, &b)],
        ..Default::default()
    };
    let needed = needed_images(&snapshot);
    assert_eq!(needed.len(), 1);
    assert_eq!(needed[0].pools().get("worker"), Some(&Need::Running));
}

#[test]
fn copies_that_disagree_need_every_image_any_of_them_names() {
    let (a, b) = (image("a"), image("b"));
    let one = Snapshot {
        pools: vec![pool()],
        nodes: vec![node("w1", true, &a, &a)],
        ..Default::default()
    };
    // Another copy of w1 that says it is updating to b.
    let other = Snapshot {
        nodes: vec![node("w1", true, &b, &a)],
        ..one.clone()
    };
    let needed = needed_images_of_all([&one, &other]);
    let images: Vec<&str> = needed.iter().map(|n| n.image.as_str()).collect();
    let mut want = vec![a.as_str(), b.as_str()];
    want.sort();
    assert_eq!(images, want);
    let na = needed
        .iter()
        .find(|n| n.image == a)
        .map(|n| n.needed_by.len());
    assert_eq!(na, Some(1), "w1 running a, once though both copies say so");
}
