//! Reading dumps: the shapes files come in, and what makes a dump incomplete.

use std::fs;
use std::sync::Arc;

use super::*;
use crate::model::node_annotations;
use crate::node::NodeMeta;

const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930";

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("file has a parent")).expect("mkdir");
        fs::write(path, content).expect("write fixture");
    }
    dir
}

fn load(files: &[(&str, &str)]) -> Loaded {
    let dir = tree(files);
    load_dir(dir.path()).expect("directory loads")
}

fn names<T: kube::core::Resource>(objects: &[Arc<T>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

fn node_names(nodes: &[Arc<NodeMeta>]) -> Vec<String> {
    nodes.iter().map(|n| n.name().to_string()).collect()
}

const MOSC: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"100\"
spec:
  machineConfigPool:
    name: worker
  renderedImagePushSpec: image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest
";

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

fn mosc_with(rv: &str, pool: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"{rv}\"
spec:
  machineConfigPool:
    name: {pool}
"
    )
}

fn pool_of_worker(loaded: &Loaded) -> String {
    assert_eq!(loaded.snapshot.machine_os_configs.len(), 1, "deduplicated");
    let mosc = &loaded.snapshot.machine_os_configs[0];
    mosc.spec
        .machine_config_pool
        .as_ref()
        .map(|p| p.name.clone())
        .unwrap_or_default()
}

#[test]
fn duplicates_keep_the_newest_resource_version() {
    // Numerically newer wins even though it is read first ("900" < "1000" as text).
    let loaded = load(&[
        ("a/single.yaml", &mosc_with("1000", "newer")),
        (
            "b/list.yaml",
            &format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}",
                mosc_with("900", "older").replace('\n', "\n  ")
            ),
        ),
    ]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    assert_eq!(pool_of_worker(&loaded), "newer");

    let loaded = load(&[
        ("a.yaml", &mosc_with("7", "older")),
        ("b.yaml", &mosc_with("8", "newer")),
    ]);
    assert_eq!(pool_of_worker(&loaded), "newer");
}

#[test]
fn disagreeing_copies_without_comparable_versions_are_all_kept() {
    for (a, b) in [("", "5"), ("5", "5")] {
        let loaded = load(&[
            ("b.yaml", &mosc_with(a, "later")),
            ("a.yaml", &mosc_with(b, "earlier")),
        ]);
        assert_eq!(
            pool_of_worker(&loaded),
            "later",
            "the copy read last comes first"
        );
        assert_eq!(loaded.variants.len(), 1, "{a:?} vs {b:?}");
        let other = &loaded.variants[0].machine_os_configs[0];
        assert_eq!(other.pool_name(), "earlier");
        assert!(loaded.variant_note().is_some());
    }
    // Copies that agree on everything the policy reads are one object.
    let loaded = load(&[
        ("a.yaml", &mosc_with("", "same")),
        ("b.yaml", &mosc_with("5", "same")),
    ]);
    assert!(loaded.variants.is_empty());
    assert_eq!(pool_of_worker(&loaded), "same");
}

#[test]
fn too_many_disagreeing_copies_make_the_dump_incomplete() {
    let files: Vec<(String, String)> = (0..7)
        .flat_map(|i| {
            let node = |v: &str| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels:\n    v: \"{v}\"\n");
            [(format!("a/n{i}.yaml"), node("a")), (format!("b/n{i}.yaml"), node("b"))]
        })
        .chain([("pool.yaml".to_string(), POOL.to_string())])
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let loaded = load(&refs);
    assert_eq!(loaded.incomplete.len(), 1, "{:?}", loaded.incomplete);
    assert!(
        loaded.incomplete[0].contains("copies of 7 objects disagree"),
        "{:?}",
        loaded.incomplete
    );
}

#[test]
fn empty_directory_is_an_empty_snapshot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let loaded = load_dir(dir.path()).expect("empty dir loads");
    assert!(loaded.warnings.is_empty());
    let snap = loaded.snapshot;
    assert!(snap.machine_os_configs.is_empty() && snap.nodes.is_empty());
}

#[test]
fn missing_directory_is_an_error_with_path_and_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope");
    let err = load_dir(&missing).expect_err("missing dir");
    let DumpError::ReadDir { path, reason } = &err;
    assert_eq!(path, &missing);
    assert_eq!(reason.kind(), io::ErrorKind::NotFound);
    let text = err.to_string();
    assert!(
        text.contains("nope") && text.contains("No such file"),
        "{text}"
    );

    let file = dir.path().join("file.yaml");
    fs::write(&file, MOSC).expect("write");
    assert!(load_dir(&file).is_err(), "a file is not a directory");
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

const POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: \"\"
";

const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: worker-a
  labels:
    node-role.kubernetes.io/worker: \"\"
";

/// A must-gather's path for a node.
const NODE_PATH: &str = "mg/cluster-scoped-resources/core/nodes/worker-a.yaml";

#[test]
fn files_of_ours_that_cannot_be_read_whole_make_the_dump_incomplete() {
    let mut utf16: Vec<u8> = vec![0xFF, 0xFE];
    utf16.extend(MOSC.encode_utf16().flat_map(u16::to_le_bytes));
    let mut latin1 = MOSC.as_bytes().to_vec();
    latin1.extend(b"  note: caf\xe9\n");
    let wrong_type = NODE.replace(
        "node-role.kubernetes.io/worker: \"\"",
        "node-role.kubernetes.io/worker: [1, 2]",
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated in a must-gather's nodes folder",
            b"apiVersion: v1\nkind: Node\nmetadata:\n  name: [x".to_vec(),
            "not valid YAML",
        ),
        (
            "a MOSC file cut short, found by its content",
            format!("{MOSC}status:\n  currentImagePullSpec: \"quay.io/x@sha").into_bytes(),
            "not valid YAML",
        ),
        ("UTF-16", utf16, "UTF-16 text"),
        ("not UTF-8", latin1, "not UTF-8 text"),
        (
            "a value of the wrong type",
            wrong_type.into_bytes(),
            "cannot decode",
        ),
    ];
    for (what, bytes, reason) in cases {
        let dir = tree(&[("pool.yaml", POOL)]);
        let path = if what.contains("must-gather") {
            NODE_PATH
        } else {
            "dump/objects.yaml"
        };
        let full = dir.path().join(path);
        fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        fs::write(&full, bytes).expect("write");
        let loaded = load_dir(dir.path()).expect("loads");
        assert_eq!(
            loaded.incomplete.len(),
            1,
            "{what}: {:?}",
            loaded.incomplete
        );
        assert!(
            loaded.incomplete[0].starts_with(path) && loaded.incomplete[0].contains(reason),
            "{what}: {:?}",
            loaded.incomplete
        );
    }
}

#[test]
fn nodes_without_pools_make_the_dump_incomplete() {
    let loaded = load(&[(NODE_PATH, NODE)]);
    assert_eq!(loaded.incomplete.len(), 1, "{:?}", loaded.incomplete);
    assert!(loaded.incomplete[0].starts_with("1 Nodes but no MachineConfigPools"));
    assert!(
        load(&[(NODE_PATH, NODE), ("pool.yaml", POOL)])
            .incomplete
            .is_empty()
    );
}

#[test]
fn a_broken_file_of_other_kinds_is_only_a_warning() {
    // A must-gather's Events name Nodes and pools inside involvedObject; a truncated one is not
    // a gap in what the policy reads.
    let events = "apiVersion: v1
items:
- apiVersion: v1
  involvedObject:
    kind: Node
    name: worker-a
  kind: Event
  message: \"unterminated
";
    let loaded = load(&[
        (
            "mg/namespaces/openshift-machine-config-operator/core/events.yaml",
            events,
        ),
        ("pool.yaml", POOL),
    ]);
    assert!(loaded.incomplete.is_empty(), "{:?}", loaded.incomplete);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
}

#[test]
fn what_real_dumps_contain_is_read() {
    let bom = format!("\u{feff}{MOSC}");
    let merged = "apiVersion: v1
kind: List
items:
- &base
  apiVersion: v1
  kind: Node
  metadata:
    name: worker-a
    labels:
      node-role.kubernetes.io/worker:
      kubernetes.io/os: linux
- <<: *base
  metadata:
    name: worker-b
    labels:
      node-role.kubernetes.io/worker: null
";
    let loaded = load(&[
        ("bom.yaml", &bom),
        ("nodes.yaml", merged),
        ("pool.yaml", POOL),
    ]);
    assert!(
        loaded.warnings.is_empty() && loaded.incomplete.is_empty(),
        "{loaded:?}"
    );
    assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
    assert_eq!(node_names(&loaded.snapshot.nodes), ["worker-a", "worker-b"]);
    for node in &loaded.snapshot.nodes {
        assert_eq!(
            node.label("node-role.kubernetes.io/worker"),
            Some(""),
            "{node:?}"
        );
    }
}

#[test]
fn deeply_nested_flow_yaml_is_refused_before_parsing() {
    let depth = 200_000;
    let hostile = format!(
        "kind: MachineOSConfig\nspec: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let loaded = load(&[("mosc.yaml", &hostile), ("ok.yaml", "a: [[[1]]]\n")]);
    assert_eq!(loaded.incomplete.len(), 1, "{:?}", loaded.incomplete);
    assert!(
        loaded.incomplete[0].contains("nested more than 64 levels"),
        "{:?}",
        loaded.incomplete
    );
    assert!(
        loaded.warnings.len() == 1 && loaded.warnings[0].contains("ok.yaml"),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn flow_depth_skips_quotes_comments_and_plain_text() {
    use super::read::flow_depth;
    let cases = [
        ("a: [1, [2, {b: 3}]]\n", 3),
        ("a: '[[[' # [[[\nb: \"[[\\\"[\"\n", 0),
        ("message: it's [not] a [flow\nnext: [x]\n", 1),
        ("- [a]\n- {b: [c]}\n", 2),
    ];
    for (text, want) in cases {
        assert_eq!(flow_depth(text), want, "{text:?}");
    }
}
