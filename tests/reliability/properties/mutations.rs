//! Strategies of JSON values and Kubernetes-shaped objects, and their mutations (edits at any place, byte edits), for the decoding properties.

use super::*;

// ---------------------------------------------------------------------------------------------
// Arbitrary and mutated inputs for the decoders.

/// Keys the decoders look at, so mutations hit fields that matter.
pub(super) const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "operation",
    "resource",
    "group",
    "version",
    "subResource",
    "name",
    "namespace",
    "object",
    "oldObject",
    "dryRun",
    "userInfo",
    "username",
    "metadata",
    "annotations",
    "labels",
    "finalizers",
    "deletionTimestamp",
    "resourceVersion",
    "spec",
    "status",
    "items",
    "machineConfigPool",
    "machineOSConfig",
    "currentImagePullSpec",
    "digestedImagePushSpec",
    "renderedImagePushSpec",
    "nodeSelector",
    "matchLabels",
    "matchExpressions",
    "conditions",
    "type",
];

pub(super) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "\\PC{0,16}",
        2 => prop::sample::select(KEYS).prop_map(str::to_string),
        2 => image().prop_map(|i| i.render()),
        1 => prop::sample::select(&[
            "DELETE", "UPDATE", "CREATE", "admission.k8s.io/v1", "AdmissionReview", GROUP,
            "machineosconfigs", "machineosbuilds", "v1", "List", "NodeList", "Node",
            "MachineOSConfig", "MachineOSBuild", "MachineConfigPool", "True", "Updating",
            finalizer::FINALIZER, OVERRIDE_ANNOTATION, "2026-11-30T00:00:00Z", "In", "NotIn",
            "Exists", "DoesNotExist",
        ][..]).prop_map(str::to_string),
    ]
}

pub(super) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A MachineOSConfig, MachineOSBuild, pool or node as the guard would see it, with random
/// finalizers, deletion, override and images.
pub(super) fn k8s_object() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["MachineOSConfig", "MachineOSBuild", "MachineConfigPool", "Node"][..]),
        prop::sample::select(&["worker", "infra", "worker-b1", ""][..]),
        prop::collection::vec(
            prop::sample::select(&[finalizer::FINALIZER, "foregroundDeletion", ""][..]),
            0..3,
        ),
        any::<bool>(),
        prop::option::of(text()),
        spec(),
        spec(),
    )
        .prop_map(|(kind, name, finalizers, deleting, reason, a, b)| {
            let api_version = if kind == "Node" {
                "v1".to_string()
            } else {
                format!("{GROUP}/v1")
            };
            let mut annotations = serde_json::Map::new();
            for (key, value) in [
                (node_annotations::DESIRED_IMAGE, &a),
                (node_annotations::CURRENT_IMAGE, &b),
                (OVERRIDE_ANNOTATION, &reason),
            ] {
                if let Some(v) = value {
                    annotations.insert(key.to_string(), json!(v));
                }
            }
            let mut v = json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {
                    "name": name,
                    "uid": "8d3ac0f8-6f6e-4c31-9d7a-2b8ac3f0f6b1",
                    "resourceVersion": "1234",
                    "finalizers": finalizers,
                    "annotations": annotations,
                    "labels": {LABEL_MACHINE_OS_CONFIG: "worker", "node-role.kubernetes.io/worker": ""},
                },
                "spec": {
                    "machineConfigPool": {"name": name},
                    "machineOSConfig": {"name": "worker"},
                    "renderedImagePushSpec": "quay.io/x/ocb-image:latest",
                    "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                },
                "status": {
                    "currentImagePullSpec": a,
                    "digestedImagePushSpec": b,
                    "conditions": [{"type": "Updating", "status": "True"}],
                },
            });
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
            }
            v
        })
}

/// A change at some place of a JSON value; `at` picks the place among all of them.
#[derive(Clone, Debug)]
pub(super) enum Edit {
    Replace { at: usize, with: Value },
    Remove { at: usize },
    Insert { at: usize, key: String, with: Value },
}

pub(super) fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), json_value()).prop_map(|(at, with)| Edit::Replace { at, with }),
        2 => any::<usize>().prop_map(|at| Edit::Remove { at }),
        1 => (any::<usize>(), text(), json_value()).prop_map(|(at, key, with)| Edit::Insert { at, key, with }),
    ]
}

/// JSON pointers to every value inside `v` (the root excluded).
pub(super) fn places(v: &Value, here: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{here}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                places(child, p, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                let p = format!("{here}/{i}");
                out.push(p.clone());
                places(child, p, out);
            }
        }
        _ => {}
    }
}

pub(super) fn apply(v: &mut Value, edit: &Edit) {
    let mut all = Vec::new();
    places(v, String::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let at = match edit {
        Edit::Replace { at, .. } | Edit::Remove { at } | Edit::Insert { at, .. } => *at,
    };
    let path = &all[at % all.len()];
    match edit {
        Edit::Replace { with, .. } => {
            if let Some(slot) = v.pointer_mut(path) {
                *slot = with.clone();
            }
        }
        Edit::Remove { .. } => {
            let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
            let last = last.replace("~1", "/").replace("~0", "~");
            match v.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(&last);
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>()
                        && i < a.len()
                    {
                        a.remove(i);
                    }
                }
                _ => {}
            }
        }
        Edit::Insert { key, with, .. } => match v.pointer_mut(path) {
            Some(Value::Object(m)) => {
                m.insert(key.clone(), with.clone());
            }
            Some(Value::Array(a)) => a.push(with.clone()),
            Some(other) => {
                let mut m = serde_json::Map::new();
                m.insert(key.clone(), with.clone());
                *other = Value::Object(m);
            }
            None => {}
        },
    }
}

/// A change to the serialized bytes.
#[derive(Clone, Debug)]
pub(super) enum ByteEdit {
    Flip { at: usize, bit: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize },
    Truncate { at: usize },
}

pub(super) fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<usize>(), 0..8u8).prop_map(|(at, bit)| ByteEdit::Flip { at, bit }),
        (
            any::<usize>(),
            prop_oneof![
                any::<u8>(),
                prop::sample::select(&b"{}[]\":,\\ \n-#&*!|>'"[..])
            ]
        )
            .prop_map(|(at, byte)| ByteEdit::Insert { at, byte }),
        any::<usize>().prop_map(|at| ByteEdit::Delete { at }),
        any::<usize>().prop_map(|at| ByteEdit::Truncate { at }),
    ]
}

pub(super) fn apply_bytes(bytes: &mut Vec<u8>, edit: &ByteEdit) {
    let len = bytes.len();
    match *edit {
        ByteEdit::Flip { at, bit } if len > 0 => bytes[at % len] ^= 1 << bit,
        ByteEdit::Insert { at, byte } => bytes.insert(at % (len + 1), byte),
        ByteEdit::Delete { at } if len > 0 => {
            bytes.remove(at % len);
        }
        ByteEdit::Truncate { at } => bytes.truncate(at % (len + 1)),
        _ => {}
    }
}

/// Bytes to decode: noise, or a well-formed value edited as JSON and then as bytes.
#[derive(Clone, Debug)]
pub(super) enum Input {
    Noise(Vec<u8>),
    Mutated {
        value: Value,
        edits: Vec<Edit>,
        byte_edits: Vec<ByteEdit>,
    },
}

pub(super) fn mutated(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Input> {
    (
        values,
        prop::collection::vec(edit(), 0..4),
        prop::collection::vec(byte_edit(), 0..3),
    )
        .prop_map(|(value, edits, byte_edits)| Input::Mutated {
            value,
            edits,
            byte_edits,
        })
}

impl Input {
    fn value(&self) -> Option<Value> {
        match self {
            Input::Noise(_) => None,
            Input::Mutated { value, edits, .. } => {
                let mut v = value.clone();
                edits.iter().for_each(|e| apply(&mut v, e));
                Some(v)
            }
        }
    }

    pub(super) fn bytes_of(&self, serialize: impl Fn(&Value) -> Vec<u8>) -> Vec<u8> {
        match self {
            Input::Noise(b) => b.clone(),
            Input::Mutated { byte_edits, .. } => {
                let mut bytes = self.value().map(|v| serialize(&v)).unwrap_or_default();
                byte_edits.iter().for_each(|e| apply_bytes(&mut bytes, e));
                bytes
            }
        }
    }
}
