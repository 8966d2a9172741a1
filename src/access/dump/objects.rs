//! Objects of a dump: the kinds the policy reads decoded into the model (and for a recovery
//! plan its nodes and the MachineConfigs' names), kept one per object ([`super::copies`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::access::live::revision_of;
use crate::core::cluster::{ClusterVersion, Machine};
use crate::core::model::{GROUP, MachineConfigPool, MachineOSBuild, MachineOSConfig, VERSION};
use crate::core::node::{Interner, NodeMeta, WireMeta};
use crate::core::recovery::RecoveryNode;
use crate::core::snapshot::Snapshot;

use super::copies::{Decoded, Kept};
use super::skipped::Skipped;
use super::typed::Typed;
use super::{RecoveryObjects, Want};

/// The objects kept so far, one per (kind, name), or several where copies disagree.
#[derive(Default)]
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
    pub(super) pull: Vec<(String, Value)>,
    interner: Interner,
    /// With [`Want::Recovery`]: the nodes as recovery reads them, and the MachineConfigs' names.
    recovery: Option<(
        Kept<RecoveryNode>,
        Option<std::collections::BTreeSet<String>>,
    )>,
}

impl Objects {
    pub(super) fn new(want: Want) -> Self {
        Objects {
            recovery: (want == Want::Recovery).then(|| (Kept::default(), None)),
            ..Objects::default()
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

    /// Keeps `typed` if it is one of ours, and says whether it is (other kinds are skipped); an
    /// error names an object of ours that could not be decoded.
    pub(super) fn add(&mut self, typed: Typed) -> Result<bool, Skipped> {
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
                return Ok(true);
            }
            ("config.openshift.io/v1", "ClusterVersion") => {
                self.versions.add(&kind, mco(&kind, object)?)?;
                return Ok(true);
            }
            ("config.openshift.io/v1", "ImageDigestMirrorSet")
            | ("operator.openshift.io/v1alpha1", "ImageContentSourcePolicy") => {
                self.pull.push((kind, Value::Object(object)));
                return Ok(true);
            }
            (_, "ControllerConfig") if mco_v1 => {
                self.pull.push((kind, Value::Object(object)));
                return Ok(true);
            }
            (_, "MachineConfig") if mco_v1 => {
                if let Some((_, names)) = &mut self.recovery {
                    let name = name_of(&object)
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| Skipped::NoName { kind: kind.clone() })?;
                    names.get_or_insert_default().insert(name.to_string());
                    return Ok(true);
                }
                return Ok(false);
            }
            _ => {}
        }
        let ours = matches!(
            kind.as_str(),
            "MachineOSConfig" | "MachineOSBuild" | "MachineConfigPool"
        ) && api_version.starts_with(&format!("{GROUP}/"))
            || (api_version == "v1" && kind == "Node");
        if !ours {
            return Ok(false);
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
        Ok(true)
    }

    /// How many Nodes were read, when no MachineConfigPool was.
    pub(super) fn nodes_without_pools(&self) -> Option<usize> {
        let nodes = self.nodes.0.len();
        (nodes > 0 && self.pools.0.is_empty()).then_some(nodes)
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
        let snapshot = |mut i| Snapshot {
            machine_os_configs: self.machine_os_configs.pick(&mut i),
            machine_os_builds: self.machine_os_builds.pick(&mut i),
            pools: self.pools.pick(&mut i),
            nodes: self.nodes.pick(&mut i),
            machines: self.machines.pick(&mut i),
            release: crate::core::cluster::running(&self.versions.pick(&mut i)),
        };
        Some((0..combos).map(snapshot).collect())
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

fn name_of(object: &Map<String, Value>) -> Option<&str> {
    object.get("metadata")?.get("name")?.as_str()
}

/// The object's name as messages quote it.
fn name_in(object: &Map<String, Value>) -> String {
    name_of(object).map_or_else(|| "<unnamed>".to_string(), |name| format!("{name:?}"))
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
    let name = node.name().to_string();
    Ok(Decoded::new(name, resource_version, node))
}

/// A Node as a recovery plan reads it ([`RecoveryNode`]).
fn recovery_node(object: &Map<String, Value>) -> Result<Decoded<RecoveryNode>, Skipped> {
    let node: RecoveryNode = serde_json::from_value(Value::Object(object.clone()))
        .map_err(Skipped::decode("Node", name_in(object), None))?;
    let resource_version = revision_of(node.resource_version.as_deref());
    Ok(Decoded::new(node.name.clone(), resource_version, node))
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
    let meta = decoded_object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let resource_version = revision_of(meta.resource_version.as_deref());
    Ok(Decoded::new(name, resource_version, decoded_object))
}
