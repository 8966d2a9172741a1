//! Objects of a dump: the items of lists, the kinds the policy reads decoded into the model
//! (and for a recovery plan its nodes and the MachineConfigs' names), and copies of one object
//! reconciled.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::core::cluster::{ClusterVersion, Machine};
use crate::core::model::{GROUP, MachineConfigPool, MachineOSBuild, MachineOSConfig, VERSION};
use crate::core::node::{Interner, NodeMeta, WireMeta};
use crate::core::recovery::RecoveryNode;
use crate::core::snapshot::Snapshot;

use super::skipped::Skipped;
use super::{RecoveryObjects, Want};

/// A Kubernetes object: its `apiVersion`, `kind` and the whole object.
pub(super) struct Typed {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) object: Map<String, Value>,
}

/// Type a list's items inherit when they lack their own (`NodeList` items are Nodes).
struct ItemType<'a> {
    api_version: &'a str,
    kind: &'a str,
}

/// Pushes the object(s) `value` holds onto `out`: itself, or the items of a list.
/// Items that are not objects are dropped and reported as one problem.
pub(super) fn flatten(value: Value, out: &mut Vec<Typed>) -> Result<(), Skipped> {
    flatten_as(value, None, out)
}

fn flatten_as(
    value: Value,
    inherit: Option<&ItemType<'_>>,
    out: &mut Vec<Typed>,
) -> Result<(), Skipped> {
    let mut object = match value {
        Value::Object(object) => object,
        other => {
            return Err(Skipped::NotAnObject {
                found: describe(&other),
            });
        }
    };
    let field = |object: &Map<String, Value>, key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let api_version =
        field(&object, "apiVersion").or_else(|| inherit.map(|t| t.api_version.to_string()));
    let kind = field(&object, "kind").or_else(|| inherit.map(|t| t.kind.to_string()));
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return Err(Skipped::NoKind);
    };
    let is_list = kind.ends_with("List")
        && matches!(object.get("items"), Some(Value::Array(_) | Value::Null));
    if !is_list {
        out.push(Typed {
            api_version,
            kind,
            object,
        });
        return Ok(());
    }
    let items = match object.remove("items") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // `kind: List` says nothing about its items; `NodeList` says they are `v1` Nodes.
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let inherit = item_kind.map(|kind| ItemType {
        api_version: &api_version,
        kind,
    });
    let mut problems = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Err(reason) = flatten_as(item, inherit.as_ref(), out) {
            problems.push(Skipped::Item {
                list: kind.clone(),
                index: i + 1,
                reason: Box::new(reason),
            });
        }
    }
    Skipped::first_of(problems, true).map_or(Ok(()), Err)
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// The objects kept so far, one per (kind, name), or several where copies disagree.
pub(super) struct Objects {
    machine_os_configs: Kept<MachineOSConfig>,
    machine_os_builds: Kept<MachineOSBuild>,
    pools: Kept<MachineConfigPool>,
    nodes: Kept<NodeMeta>,
    /// By `namespace/name`.
    machines: Kept<Machine>,
    versions: Kept<ClusterVersion>,
    /// The objects a pull as the node makes it reads: the ControllerConfig and the mirror sets,
    /// as `(kind, object)` (`access::registry` decodes them).
    pull: Vec<(String, Value)>,
    interner: Interner,
    /// With [`Want::Recovery`]: the nodes as recovery reads them, and the MachineConfigs' names.
    recovery: Option<(
        Kept<RecoveryNode>,
        Option<std::collections::BTreeSet<String>>,
    )>,
}

/// What [`Objects::add`] made of an object.
pub(super) enum Added {
    /// One of the kinds the policy reads.
    Ours,
    /// Some other kind: skipped.
    Other,
}

impl Objects {
    pub(super) fn new(want: Want) -> Self {
        Objects {
            machine_os_configs: Kept::default(),
            machine_os_builds: Kept::default(),
            pools: Kept::default(),
            nodes: Kept::default(),
            machines: Kept::default(),
            versions: Kept::default(),
            pull: Vec::new(),
            interner: Interner::default(),
            recovery: (want == Want::Recovery).then(|| (Kept::default(), None)),
        }
    }

    pub(super) fn want(&self) -> Want {
        match self.recovery {
            Some(_) => Want::Recovery,
            None => Want::Policy,
        }
    }

    /// What a recovery plan reads besides, once every file is read.
    pub(super) fn take_recovery(&mut self) -> Option<RecoveryObjects> {
        let (nodes, machine_configs) = self.recovery.take()?;
        let mut disagreeing = Vec::new();
        nodes.disagreeing("Node", &mut disagreeing);
        Some(RecoveryObjects {
            nodes: nodes
                .pick(&mut 0)
                .iter()
                .map(|n| n.as_ref().clone())
                .collect(),
            machine_configs,
            disagreeing: disagreeing
                .into_iter()
                .map(|d| d.trim_start_matches("Node/").to_string())
                .collect(),
        })
    }

    /// Keeps `typed` if it is one of ours; an error names an object of ours that could
    /// not be decoded.
    pub(super) fn add(&mut self, typed: Typed) -> Result<Added, Skipped> {
        let Typed {
            api_version,
            kind,
            mut object,
        } = typed;
        let mco_v1 = api_version == format!("{GROUP}/{VERSION}");
        match (api_version.as_str(), kind.as_str()) {
            ("machine.openshift.io/v1beta1", "Machine") => {
                null_values_are_empty(&mut object);
                let mut machine = mco::<Machine>(&kind, object)?;
                machine.name = format!("{}/{}", machine.object.namespace(), machine.name);
                self.machines.add(&kind, machine)?;
                return Ok(Added::Ours);
            }
            ("config.openshift.io/v1", "ClusterVersion") => {
                self.versions.add(&kind, mco(&kind, object)?)?;
                return Ok(Added::Ours);
            }
            ("config.openshift.io/v1", "ImageDigestMirrorSet")
            | ("operator.openshift.io/v1alpha1", "ImageContentSourcePolicy") => {
                self.pull.push((kind, Value::Object(object)));
                return Ok(Added::Ours);
            }
            (_, "ControllerConfig") if mco_v1 => {
                self.pull.push((kind, Value::Object(object)));
                return Ok(Added::Ours);
            }
            (_, "MachineConfig") if mco_v1 => {
                if let Some((_, names)) = &mut self.recovery {
                    let name = object
                        .get("metadata")
                        .and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| Skipped::NoName { kind: kind.clone() })?;
                    names.get_or_insert_default().insert(name.to_string());
                    return Ok(Added::Ours);
                }
                return Ok(Added::Other);
            }
            _ => {}
        }
        let ours = matches!(
            kind.as_str(),
            "MachineOSConfig" | "MachineOSBuild" | "MachineConfigPool"
        ) && api_version.starts_with(&format!("{GROUP}/"))
            || (api_version == "v1" && kind == "Node");
        if !ours {
            return Ok(Added::Other);
        }
        if !mco_v1 && kind != "Node" {
            // An older API (4.16-4.18 tech preview v1alpha1) with a different schema:
            // decoding it as v1 would guess wrong, and silently missing it would make
            // `check` answer "not found".
            return Err(Skipped::Unsupported {
                name: name_in(&object),
                api_version,
                kind,
            });
        }
        null_values_are_empty(&mut object);
        if let (Some((nodes, _)), "Node") = (&mut self.recovery, kind.as_str()) {
            nodes.add(&kind, recovery_node(&object)?)?;
        }
        match kind.as_str() {
            "Node" => self.nodes.add(&kind, node(object, &mut self.interner)?),
            "MachineOSConfig" => self.machine_os_configs.add(&kind, mco(&kind, object)?),
            "MachineOSBuild" => self.machine_os_builds.add(&kind, mco(&kind, object)?),
            _ => self.pools.add(&kind, mco(&kind, object)?),
        }?;
        Ok(Added::Ours)
    }

    /// The ControllerConfig and mirror sets read, once every file is read.
    pub(super) fn take_pull(&mut self) -> Vec<(String, Value)> {
        std::mem::take(&mut self.pull)
    }

    pub(super) fn node_count(&self) -> usize {
        self.nodes.0.len()
    }

    pub(super) fn pool_count(&self) -> usize {
        self.pools.0.len()
    }

    /// Names of the objects whose copies disagree with no resourceVersion to choose, as
    /// `Kind/name`.
    pub(super) fn disagreeing(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.machine_os_configs
            .disagreeing("MachineOSConfig", &mut out);
        self.machine_os_builds
            .disagreeing("MachineOSBuild", &mut out);
        self.pools.disagreeing("MachineConfigPool", &mut out);
        self.nodes.disagreeing("Node", &mut out);
        self.machines.disagreeing("Machine", &mut out);
        self.versions.disagreeing("ClusterVersion", &mut out);
        out
    }

    /// Every snapshot the copies allow: one choice per disagreeing object, each combination
    /// once (the first is the one with the copy read last of each); `None` past `limit`.
    pub(super) fn into_snapshots(self, limit: usize) -> Option<Vec<Snapshot>> {
        let combos = [
            self.machine_os_configs.choices(),
            self.machine_os_builds.choices(),
            self.pools.choices(),
            self.nodes.choices(),
            self.machines.choices(),
            self.versions.choices(),
        ]
        .iter()
        .try_fold(1usize, |n, c| n.checked_mul(*c))?;
        if combos > limit {
            return None;
        }
        let mut snapshots = Vec::with_capacity(combos);
        for mut i in 0..combos {
            snapshots.push(Snapshot {
                machine_os_configs: self.machine_os_configs.pick(&mut i),
                machine_os_builds: self.machine_os_builds.pick(&mut i),
                pools: self.pools.pick(&mut i),
                nodes: self.nodes.pick(&mut i),
                machines: self.machines.pick(&mut i),
                release: crate::core::cluster::running(&self.versions.pick(&mut i)),
            });
        }
        Some(snapshots)
    }
}

/// `null` label and annotation values read as empty strings: YAML writes `key:` for an
/// empty value, and the label is there all the same (`node-role.kubernetes.io/worker:`).
fn null_values_are_empty(object: &mut Map<String, Value>) {
    let Some(Value::Object(meta)) = object.get_mut("metadata") else {
        return;
    };
    for key in ["labels", "annotations"] {
        if let Some(Value::Object(map)) = meta.get_mut(key) {
            for value in map.values_mut() {
                if value.is_null() {
                    *value = Value::String(String::new());
                }
            }
        }
    }
}

/// A decoded object ready to keep.
struct Decoded<T> {
    name: String,
    resource_version: Option<u64>,
    /// What the policy reads of it, to tell copies that disagree from copies that do not.
    content: Value,
    object: T,
}

/// The copies kept of one object: the winner so far, or several that disagree.
struct Copies<T> {
    resource_version: Option<u64>,
    /// Distinct by content, the copy read last first.
    objects: Vec<(Value, Arc<T>)>,
}

/// Objects of one kind by name. Of two copies with numeric resourceVersions the larger wins;
/// where either has none, or they are equal, copies that disagree are all kept, and the
/// verdict is the most cautious over them ([`Objects::into_snapshots`]).
struct Kept<T>(BTreeMap<String, Copies<T>>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(BTreeMap::new())
    }
}

impl<T> Kept<T> {
    fn add(&mut self, kind: &str, decoded: Decoded<T>) -> Result<(), Skipped> {
        if decoded.name.is_empty() {
            return Err(Skipped::NoName {
                kind: kind.to_string(),
            });
        }
        let new = (decoded.content, Arc::new(decoded.object));
        let Some(kept) = self.0.get_mut(&decoded.name) else {
            self.0.insert(
                decoded.name,
                Copies {
                    resource_version: decoded.resource_version,
                    objects: vec![new],
                },
            );
            return Ok(());
        };
        match (kept.resource_version, decoded.resource_version) {
            (Some(old), Some(rv)) if old > rv => {}
            (Some(old), Some(rv)) if old < rv => {
                kept.resource_version = Some(rv);
                kept.objects = vec![new];
            }
            _ => {
                kept.resource_version = kept.resource_version.max(decoded.resource_version);
                kept.objects.retain(|(content, _)| *content != new.0);
                kept.objects.insert(0, new);
            }
        }
        Ok(())
    }

    fn choices(&self) -> usize {
        self.0.values().map(|c| c.objects.len()).product()
    }

    fn disagreeing(&self, kind: &str, out: &mut Vec<String>) {
        out.extend(
            self.0
                .iter()
                .filter(|(_, c)| c.objects.len() > 1)
                .map(|(name, _)| format!("{kind}/{name}")),
        );
    }

    /// One copy of each object, sorted by name: combination `i` (mixed radix over the
    /// objects with several copies; `i` keeps the rest for the next kind).
    fn pick(&self, i: &mut usize) -> Vec<Arc<T>> {
        self.0
            .values()
            .map(|c| {
                let n = c.objects.len();
                let choice = *i % n;
                *i /= n;
                Arc::clone(&c.objects[choice].1)
            })
            .collect()
    }
}

fn name_in(object: &Map<String, Value>) -> String {
    match object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
    {
        Some(name) => format!("{name:?}"),
        None => "<unnamed>".to_string(),
    }
}

fn decoded<T: Serialize>(object: T, meta: impl Fn(&T) -> &ObjectMeta) -> Decoded<T> {
    let meta = meta(&object);
    let name = meta.name.clone().unwrap_or_default();
    let resource_version = meta
        .resource_version
        .as_deref()
        .and_then(|rv| rv.trim().parse().ok());
    Decoded {
        name,
        resource_version,
        content: content_of(&object),
        object,
    }
}

/// The object as the model keeps it, without the metadata that differs between copies of one
/// state (resourceVersion, managedFields are not kept; generation and timestamps are dropped).
fn content_of<T: Serialize>(object: &T) -> Value {
    let mut v = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(Value::Object(meta)) = v.get_mut("metadata") {
        for key in [
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(key);
        }
    }
    v
}

/// A Node reduced to what the policy reads (see [`crate::core::node`]), its strings shared with the
/// other nodes of the dump through `interner`.
fn node(
    mut object: Map<String, Value>,
    interner: &mut Interner,
) -> Result<Decoded<NodeMeta>, Skipped> {
    let name = name_in(&object);
    let meta: WireMeta = serde_json::from_value(object.remove("metadata").unwrap_or(Value::Null))
        .map_err(Skipped::decode("Node", name, Some("metadata")))?;
    let resource_version = meta.revision();
    let node = NodeMeta::from_wire(meta, interner, |_| true);
    Ok(Decoded {
        name: node.name().to_string(),
        resource_version,
        content: content_of(&node),
        object: node,
    })
}

/// A Node as a recovery plan reads it ([`RecoveryNode`]).
fn recovery_node(object: &Map<String, Value>) -> Result<Decoded<RecoveryNode>, Skipped> {
    let node: RecoveryNode = serde_json::from_value(Value::Object(object.clone()))
        .map_err(Skipped::decode("Node", name_in(object), None))?;
    Ok(Decoded {
        name: node.name.clone(),
        resource_version: node
            .resource_version
            .as_deref()
            .and_then(|rv| rv.trim().parse().ok()),
        content: content_of(&node),
        object: node,
    })
}

/// One of the MCO kinds, decoded into our model (without managedFields).
fn mco<T>(kind: &str, mut object: Map<String, Value>) -> Result<Decoded<T>, Skipped>
where
    T: DeserializeOwned + Serialize + kube::core::Resource,
{
    let name = name_in(&object);
    // managedFields can dwarf the rest of the object; nothing reads it.
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.remove("managedFields");
    }
    let decoded_object: T =
        serde_json::from_value(Value::Object(object)).map_err(Skipped::decode(kind, name, None))?;
    Ok(decoded(decoded_object, T::meta))
}
