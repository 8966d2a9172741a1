//! Names, API handles and small accessors for the MCO objects the harness works with
//! (MachineOSConfig, MachineOSBuild, MachineConfigPool as dynamic objects; Nodes typed).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

/// API group of the MCO resources.
pub const GROUP: &str = "machineconfiguration.openshift.io";
/// Prefix of MCO's annotations and labels.
pub const PREFIX: &str = "machineconfiguration.openshift.io/";

/// Node annotation: digested pull spec the node should run.
pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
/// Node annotation: digested pull spec the node runs.
pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
/// Node annotation: rendered MachineConfig the node should run.
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
/// Node annotation: rendered MachineConfig the node runs.
pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
/// Node annotation: Done | Working | Degraded | Unreconcilable | Rebooting.
pub const STATE: &str = "machineconfiguration.openshift.io/state";
/// Node annotation: error text of a Degraded node.
pub const REASON: &str = "machineconfiguration.openshift.io/reason";

/// MOSC annotation: name of the current MachineOSBuild.
pub const CURRENT_MOSB: &str = "machineconfiguration.openshift.io/current-machine-os-build";
/// MOSC annotation set by admins to force a rebuild.
pub const REBUILD: &str = "machineconfiguration.openshift.io/rebuild";

/// MOSB label: name of its MachineOSConfig.
pub const LABEL_MOSC: &str = "machineconfiguration.openshift.io/machine-os-config";
/// MOSB label: name of the pool it targets.
pub const LABEL_POOL: &str = "machineconfiguration.openshift.io/target-machine-config-pool";
/// MOSB label: the rendered MachineConfig it was built from.
pub const LABEL_RENDERED: &str = "machineconfiguration.openshift.io/rendered-machine-config";

/// Node states written by the daemon.
pub const STATE_DONE: &str = "Done";
pub const STATE_WORKING: &str = "Working";
pub const STATE_DEGRADED: &str = "Degraded";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), plural)
}

/// ApiResource of MachineOSConfig.
pub fn mosc_resource() -> ApiResource {
    resource("MachineOSConfig", "machineosconfigs")
}
/// ApiResource of MachineOSBuild.
pub fn mosb_resource() -> ApiResource {
    resource("MachineOSBuild", "machineosbuilds")
}
/// ApiResource of MachineConfigPool.
pub fn mcp_resource() -> ApiResource {
    resource("MachineConfigPool", "machineconfigpools")
}

/// Cluster-wide API for MachineOSConfigs.
pub fn moscs(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &mosc_resource())
}
/// Cluster-wide API for MachineOSBuilds.
pub fn mosbs(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &mosb_resource())
}
/// Cluster-wide API for MachineConfigPools.
pub fn mcps(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &mcp_resource())
}
/// API for Nodes.
pub fn nodes(client: &kube::Client) -> Api<Node> {
    Api::all(client.clone())
}

/// Every object `api` lists (the simulator's controllers re-read the world each pass).
pub async fn list_all<K>(api: &Api<K>) -> super::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api.list(&kube::api::ListParams::default()).await?.items)
}

/// The string at `path` inside a JSON value, if present and non-empty.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut v = value;
    for key in path {
        v = v.get(key)?;
    }
    v.as_str().filter(|s| !s.is_empty())
}

/// The condition of type `type_` in `obj.status.conditions`, if present.
pub fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    obj.data
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Whether the condition `type_` of `obj` has status "True".
pub fn condition_true(obj: &DynamicObject, type_: &str) -> bool {
    condition(obj, type_)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

/// An annotation of a node (None when absent or empty).
pub fn node_annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// The `spec.nodeSelector.matchLabels` of a pool (empty when absent).
pub fn pool_match_labels(pool: &DynamicObject) -> BTreeMap<String, String> {
    pool.data
        .get("spec")
        .and_then(|s| s.get("nodeSelector"))
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the node's labels satisfy every `matchLabels` entry (an empty selector matches none,
/// unlike Kubernetes, so a pool without a selector never captures all nodes).
pub fn selector_matches(match_labels: &BTreeMap<String, String>, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    !match_labels.is_empty() && match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The rendered MachineConfig a pool targets: `spec.configuration.name`, or
/// `rendered-<pool>-0` when unset (there is no render controller in the harness).
pub fn pool_target_config(pool: &DynamicObject) -> String {
    str_at(&pool.data, &["spec", "configuration", "name"])
        .map(str::to_owned)
        .unwrap_or_else(|| format!("rendered-{}-0", pool.metadata.name.as_deref().unwrap_or("")))
}
