use super::*;
use serde_json::json;

fn wire(v: serde_json::Value) -> WireMeta {
    serde_json::from_value::<WireNode>(v)
        .expect("wire")
        .metadata
}

#[test]
fn keeps_name_labels_and_the_three_image_annotations_only() {
    let text = json!({"kind": "PartialObjectMetadata", "metadata": {
        "name": "worker-0", "resourceVersion": "42", "uid": "u",
        "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "worker-0"},
        "annotations": {
            DESIRED_IMAGE: "quay.io/x@sha256:aa", CURRENT_IMAGE: "quay.io/x@sha256:bb",
            STATE: "Working", "k8s.ovn.org/node-subnets": "{\"default\":[\"10.128.2.0/23\"]}",
            "escaped\"key": {"not": "a string"}
        },
        "managedFields": [{"manager": "kubelet"}]
    }})
    .to_string();
    let meta = serde_json::from_str::<WireNode>(&text)
        .expect("decodes")
        .metadata;
    assert_eq!(meta.revision(), Some(42));
    let node = NodeMeta::from_wire(meta, &mut Interner::default(), |_| true);
    assert_eq!(node.name(), "worker-0");
    assert_eq!(node.label("node-role.kubernetes.io/worker"), Some(""));
    assert_eq!(node.label("kubernetes.io/hostname"), Some("worker-0"));
    assert_eq!(node.label("absent"), None);
    assert_eq!(node.desired_image(), Some("quay.io/x@sha256:aa"));
    assert_eq!(node.current_image(), Some("quay.io/x@sha256:bb"));
    assert_eq!(node.state(), Some("Working"));
}

#[test]
fn null_and_missing_maps_decode_as_empty() {
    for v in [
        json!({"metadata": {"name": "n", "labels": null, "annotations": null}}),
        json!({"metadata": {"name": "n"}}),
        json!({}),
    ] {
        let node = NodeMeta::from_wire(wire(v), &mut Interner::default(), |_| true);
        assert_eq!(node.labels().count(), 0);
        assert_eq!(node.desired_image(), None);
    }
}

#[test]
fn a_wrongly_typed_image_annotation_is_an_error_not_a_guess() {
    let bad = json!({"metadata": {"annotations": {DESIRED_IMAGE: 7}}});
    assert!(serde_json::from_value::<WireNode>(bad).is_err());
}

#[test]
fn equal_strings_are_shared_and_purged_when_unused() {
    let mut interner = Interner::default();
    let meta = |name: &str| {
        wire(json!({"metadata": {"name": name,
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {DESIRED_IMAGE: "quay.io/x@sha256:aa"}}}))
    };
    let a = NodeMeta::from_wire(meta("a"), &mut interner, |_| true);
    let b = NodeMeta::from_wire(meta("b"), &mut interner, |_| true);
    assert!(Arc::ptr_eq(
        a.desired.as_ref().expect("a"),
        b.desired.as_ref().expect("b")
    ));
    assert!(Arc::ptr_eq(&a.labels[0].0, &b.labels[0].0));
    // name a, name b, the label key, its value "", the image
    assert_eq!(interner.strings.len(), 5);
    drop(b);
    interner.purge();
    assert_eq!(interner.strings.len(), 4, "only b's name went");
}

#[test]
fn labels_can_be_limited_to_the_keys_pool_selectors_use() {
    let node = NodeMeta::from_wire(
        wire(json!({"metadata": {"name": "n", "labels": {"a": "1", "b": "2", "c": "3"}}})),
        &mut Interner::default(),
        |k| k != "b",
    );
    assert_eq!(node.labels().collect::<Vec<_>>(), [("a", "1"), ("c", "3")]);
}

#[test]
fn serializes_back_to_the_shape_it_reads() {
    let v = json!({"metadata": {"name": "n", "labels": {"a": "1"},
        "annotations": {DESIRED_IMAGE: "img", STATE: "Done"}}});
    let node: NodeMeta = serde_json::from_value(v.clone()).expect("node");
    assert_eq!(serde_json::to_value(&node).expect("json"), v);
    let again: NodeMeta = serde_json::from_value(v).expect("node");
    assert_eq!(node, again);
}

#[test]
fn an_annotation_key_is_borrowed_from_the_input_unless_it_has_escapes() {
    let key: Key =
        serde_json::from_str("\"machineconfiguration.openshift.io/state\"").expect("key");
    assert!(matches!(key.0, Cow::Borrowed(_)), "no copy for a plain key");
    let key: Key = serde_json::from_str("\"escaped\\\"key\"").expect("key");
    assert_eq!(key.0, "escaped\"key");
}
