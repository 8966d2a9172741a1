//! What makes a dump incomplete, and what real dumps contain that must still be read.

use std::fs;

use super::*;

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
