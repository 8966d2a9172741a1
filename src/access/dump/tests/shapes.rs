//! The shapes files come in: documents, lists, typed lists, noise, symlinks.

use super::*;

#[test]
fn multi_document_yaml() {
    let text = format!(
        "---\n{MOSC}---\napiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: worker-8f2a1c
  labels:
    machineconfiguration.openshift.io/machine-os-config: worker
status:
  digestedImagePushSpec: {IMAGE}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: other
  namespace: default
---
"
    );
    let loaded = load(&[("all.yaml", &text)]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    let snap = &loaded.snapshot;
    assert_eq!(names(&snap.machine_os_configs), ["worker"]);
    assert_eq!(names(&snap.machine_os_builds), ["worker-8f2a1c"]);
    let mosb = snap.machine_os_build("worker-8f2a1c").expect("mosb kept");
    assert_eq!(mosb.status.digested_image_push_spec.as_deref(), Some(IMAGE));
    assert!(mosb.belongs_to("worker"));
}

#[test]
fn list_with_item_kinds() {
    let text = format!(
        "apiVersion: v1
kind: List
metadata:
  resourceVersion: \"\"
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfigPool
  metadata:
    name: worker
  spec:
    nodeSelector:
      matchLabels:
        node-role.kubernetes.io/worker: \"\"
- apiVersion: v1
  kind: Node
  metadata:
    name: worker-a
    managedFields:
    - manager: kubelet
      operation: Update
    annotations:
      {}: {IMAGE}
  spec:
    providerID: aws:///us-east-2a/i-0123
  status:
    nodeInfo:
      kubeletVersion: v1.33.5
",
        node_annotations::DESIRED_IMAGE
    );
    let loaded = load(&[("list.yml", &text)]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    let snap = &loaded.snapshot;
    assert_eq!(names(&snap.pools), ["worker"]);
    assert!(snap.pools[0].spec.node_selector.is_some());
    assert_eq!(node_names(&snap.nodes), ["worker-a"]);
    let node = &snap.nodes[0];
    assert_eq!(node.desired_image(), Some(IMAGE));
    assert_eq!(node.labels().count(), 0, "the fixture's node has no labels");
}

#[test]
fn typed_list_items_inherit_kind_and_json_lists() {
    let nodes = r#"{
  "apiVersion": "v1",
  "kind": "NodeList",
  "metadata": {"resourceVersion": "123"},
  "items": [
    {"metadata": {"name": "worker-b", "labels": {"node-role.kubernetes.io/worker": ""}}},
    {"metadata": {"name": "worker-a"}}
  ]
}"#;
    let moscs = format!(
        r#"{{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfigList",
                "items": [{{"metadata": {{"name": "worker"}}, "spec": {{"machineConfigPool": {{"name": "worker"}}}},
                            "status": {{"currentImagePullSpec": "{IMAGE}"}}}}]}}"#
    );
    let empty = r#"{"apiVersion": "v1", "kind": "List", "items": []}"#;
    let loaded = load(&[
        ("nodes.json", nodes),
        ("moscs.JSON", &moscs),
        ("empty.json", empty),
    ]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    let snap = &loaded.snapshot;
    assert_eq!(
        node_names(&snap.nodes),
        ["worker-a", "worker-b"],
        "sorted by name"
    );
    let mosc = snap
        .machine_os_config("worker")
        .expect("mosc from typed list");
    assert_eq!(mosc.status.current_image_pull_spec.as_deref(), Some(IMAGE));
}

#[test]
fn untyped_items_of_a_list_that_holds_nodes_make_it_incomplete() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"metadata": {"name": "a"}},
        "junk",
        null,
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    ]}"#;
    let loaded = load(&[("list.json", text)]);
    assert_eq!(
        node_names(&loaded.snapshot.nodes),
        ["n"],
        "good items still read"
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(
        loaded.incomplete,
        [
            "list.json: List item 1: not a Kubernetes object (no apiVersion/kind) (and 2 more items) (it holds Nodes)",
            "1 Nodes but no MachineConfigPools: which pool each node is in, and so whether a pool is still rolling out, cannot be told",
        ]
    );
}

#[test]
fn noise_files_are_one_warning_each() {
    let loaded = load(&[
        ("timestamp", "2025-11-30 02:19:00 +0000 UTC\n"),
        ("event-filter.html", "<html><body>events</body></html>"),
        ("a/not-yaml.yaml", "key: [unclosed\n  - : :\n"),
        ("a/strings.json", r#"["one", "two"]"#),
        ("a/prose.yaml", "just some words\n"),
        ("a/half.yaml", "{}\n---\nfoo: bar\n"),
        (
            "a/pod.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\nspec:\n  containers: []\n",
        ),
        ("a/binary.json", "\u{0}\u{1}{"),
        ("a/empty.yaml", ""),
        ("a/only-separators.yml", "---\n---\n"),
        ("b/mosc.yaml", MOSC),
    ]);
    assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
    let w = &loaded.warnings;
    assert_eq!(w.len(), 5, "{w:#?}");
    assert!(
        w[0].starts_with("skipping a/binary.json: not valid JSON"),
        "{}",
        w[0]
    );
    assert!(
            w[1].starts_with("skipping a/half.yaml: document 1: not a Kubernetes object (no apiVersion/kind) (and 1 more)"),
            "{}",
            w[1]
        );
    assert!(
        w[2].starts_with("skipping a/not-yaml.yaml: not valid YAML"),
        "{}",
        w[2]
    );
    assert_eq!(
        w[3],
        "skipping a/prose.yaml: not a Kubernetes object (found a string)"
    );
    assert_eq!(
        w[4],
        "skipping a/strings.json: not a Kubernetes object (found a sequence)"
    );
}

#[test]
fn an_undecodable_object_of_ours_makes_the_dump_incomplete() {
    let bad = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: infra
spec:
  machineConfigPool: infra
";
    let nameless = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {}
";
    let alpha = "apiVersion: machineconfiguration.openshift.io/v1alpha1
kind: MachineOSConfig
metadata:
  name: old
spec:
  machineConfigPool:
    name: old
";
    let loaded = load(&[
        ("bad.yaml", bad),
        ("good.yaml", MOSC),
        ("nameless.yaml", nameless),
        ("v1alpha1.yaml", alpha),
    ]);
    assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
    assert!(loaded.snapshot.pools.is_empty());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let w = &loaded.incomplete;
    assert_eq!(w.len(), 3, "{w:#?}");
    assert!(
        w[0].starts_with("bad.yaml: MachineOSConfig \"infra\": cannot decode:"),
        "{}",
        w[0]
    );
    assert_eq!(
        w[1],
        "nameless.yaml: MachineConfigPool without metadata.name"
    );
    assert!(
        w[2].contains("v1alpha1 MachineOSConfig \"old\" is not supported"),
        "{}",
        w[2]
    );
}

#[cfg(unix)]
#[test]
fn symlinks_are_followed_and_loops_reported() {
    let outside = tree(&[("mosc.yaml", MOSC), ("more/pool.yaml", POOL)]);
    let dir = tree(&[]);
    let link = |target: &Path, at: &str| {
        std::os::unix::fs::symlink(target, dir.path().join(at)).expect("symlink");
    };
    link(&outside.path().join("mosc.yaml"), "link.yaml");
    link(&outside.path().join("more"), "linkdir");
    link(dir.path(), "loop");
    let loaded = load_dir(dir.path()).expect("loads");
    assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
    assert_eq!(names(&loaded.snapshot.pools), ["worker"]);
    assert_eq!(
        loaded.warnings,
        ["skipping loop: symlink loop, not followed again"]
    );
    assert!(loaded.incomplete.is_empty(), "{:?}", loaded.incomplete);
}
