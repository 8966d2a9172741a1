//! Names, API handles and small accessors for the MCO objects the harness works with
//! (MachineOSConfig, MachineOSBuild, MachineConfigPool, MachineConfig as dynamic objects; Nodes
//! typed), and the kinds that say how nodes pull (ControllerConfig, ImageDigestMirrorSet).

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
/// Node annotation the daemon sets to ask the drain controller for `drain-<config>` (cordon and
/// drain) or `uncordon-<config>`.
pub const DESIRED_DRAIN: &str = "machineconfiguration.openshift.io/desiredDrain";
/// Node annotation the drain controller sets to the request it carried out.
pub const LAST_APPLIED_DRAIN: &str = "machineconfiguration.openshift.io/lastAppliedDrain";
/// Node annotation the node controller copies from the cluster's infrastructure
/// (`HighlyAvailable`, `SingleReplica`, ...); the daemon skips the drain on `SingleReplica`.
pub const CONTROL_PLANE_TOPOLOGY: &str = "machineconfiguration.openshift.io/controlPlaneTopology";
/// [`CONTROL_PLANE_TOPOLOGY`] of a multi-node cluster.
pub const TOPOLOGY_HIGHLY_AVAILABLE: &str = "HighlyAvailable";
/// [`CONTROL_PLANE_TOPOLOGY`] of a single-node cluster (no drain).
pub const TOPOLOGY_SINGLE_REPLICA: &str = "SingleReplica";

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

/// Namespace of MCO's components and of the builds' objects.
pub const MOB_NAMESPACE: &str = "openshift-machine-config-operator";
/// The machine-os-builder's ServiceAccount (in [`MOB_NAMESPACE`]).
pub const MOB_SERVICE_ACCOUNT: &str = "machine-os-builder";
/// The user name the machine-os-builder's requests carry: every MOSB deletion MCO makes itself
/// (its cleanups, superseded builds, rebuilds) comes from it.
pub const MOB_USER: &str =
    "system:serviceaccount:openshift-machine-config-operator:machine-os-builder";
/// MOSC annotation (4.21 on): a digested image to seed the MOSC with instead of building.
pub const PRE_BUILT_IMAGE: &str = "machineconfiguration.openshift.io/pre-built-image";
/// MOSB label marking a synthetic build seeded from [`PRE_BUILT_IMAGE`] (value `true`).
pub const LABEL_PRE_BUILT: &str = "machineconfiguration.openshift.io/pre-built-image";

/// Node states written by the daemon.
pub const STATE_DONE: &str = "Done";
pub const STATE_WORKING: &str = "Working";
pub const STATE_DEGRADED: &str = "Degraded";
pub const STATE_UNRECONCILABLE: &str = "Unreconcilable";

/// The drain request of the daemon before it changes the OS to `config` (`drain-<config>`).
pub fn drain_request(config: &str) -> String {
    format!("drain-{config}")
}

/// The uncordon request of the daemon once it runs `config` (`uncordon-<config>`).
pub fn uncordon_request(config: &str) -> String {
    format!("uncordon-{config}")
}

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
/// ApiResource of MachineConfig (the pools' rendered configs).
pub fn mc_resource() -> ApiResource {
    resource("MachineConfig", "machineconfigs")
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
/// Cluster-wide API for MachineConfigs.
pub fn mcs(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &mc_resource())
}
/// API for Nodes.
pub fn nodes(client: &kube::Client) -> Api<Node> {
    Api::all(client.clone())
}

/// Every object `api` lists (the simulator's controllers re-read the world each pass).
pub async fn list_all<K>(api: &Api<K>) -> crate::Result<Vec<K>>
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

/// `obj.status.conditions` (empty when there are none).
pub fn conditions(obj: &DynamicObject) -> &[Value] {
    obj.data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The condition of type `type_` in `obj.status.conditions`, if present.
pub fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    conditions(obj)
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

/// A node annotation as MCO's Go code reads it (`node.Annotations[key]`): "" when absent.
pub fn raw_annotation<'a>(node: &'a Node, key: &str) -> &'a str {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map_or("", String::as_str)
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn is_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Node label the kubelet sets to the node's OS; MCO never manages a node whose value is
/// `windows` (`helpers.IsWindows`).
pub const OS_LABEL: &str = "kubernetes.io/os";
/// The zone label MCO's node controller sorts candidates by when it cannot take them all
/// (`sortNodeList`).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// One requirement of a label selector, as `metav1.LabelSelectorAsSelector` builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

/// The operators of `matchExpressions` (a `matchLabels` entry is `In` with one value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A label selector as Kubernetes reads it: `None` for a nil selector (matches nothing),
/// otherwise every requirement (an empty list is Kubernetes' "everything"; MCO treats it as
/// nothing, see [`LabelSelector::selects_nothing_for_mco`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector(pub Option<Vec<Requirement>>);

impl LabelSelector {
    /// Parses a `metav1.LabelSelector` JSON value (`None`/null: the nil selector). Errs like
    /// `LabelSelectorAsSelector` on an unknown operator, `In`/`NotIn` without values or
    /// `Exists`/`DoesNotExist` with values.
    pub fn parse(value: Option<&Value>) -> Result<Self, String> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(Self(None));
        };
        let mut requirements = Vec::new();
        if let Some(labels) = value.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels
                .as_object()
                .ok_or_else(|| format!("matchLabels is not an object: {labels}"))?;
            for (key, v) in labels {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("matchLabels[{key}] is not a string: {v}"))?;
                requirements.push(Requirement {
                    key: key.clone(),
                    operator: Operator::In,
                    values: vec![v.to_owned()],
                });
            }
        }
        if let Some(exprs) = value.get("matchExpressions").filter(|v| !v.is_null()) {
            let exprs = exprs
                .as_array()
                .ok_or_else(|| format!("matchExpressions is not a list: {exprs}"))?;
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("matchExpression without a key: {e}"))?;
                let operator = match e.get("operator").and_then(Value::as_str) {
                    Some("In") => Operator::In,
                    Some("NotIn") => Operator::NotIn,
                    Some("Exists") => Operator::Exists,
                    Some("DoesNotExist") => Operator::DoesNotExist,
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                };
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let needs_values = matches!(operator, Operator::In | Operator::NotIn);
                if needs_values == values.is_empty() {
                    return Err(format!(
                        "matchExpression {key} {operator:?}: {} values",
                        if needs_values { "needs" } else { "takes no" }
                    ));
                }
                requirements.push(Requirement {
                    key: key.to_owned(),
                    operator,
                    values,
                });
            }
        }
        Ok(Self(Some(requirements)))
    }

    /// Whether `labels` satisfy every requirement (a nil selector matches nothing, an empty
    /// one everything, as in Kubernetes).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let Some(requirements) = &self.0 else {
            return false;
        };
        requirements.iter().all(|r| {
            let value = labels.get(&r.key);
            match r.operator {
                Operator::In => value.is_some_and(|v| r.values.contains(v)),
                Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }

    /// MCO's `ListPools`: "if a pool with a nil or empty selector creeps in, it should match
    /// nothing, not everything".
    pub fn selects_nothing_for_mco(&self) -> bool {
        self.0.as_ref().is_none_or(Vec::is_empty)
    }
}

/// A pool's `spec.nodeSelector`.
pub fn pool_node_selector(pool: &DynamicObject) -> Result<LabelSelector, String> {
    LabelSelector::parse(pool.data.get("spec").and_then(|s| s.get("nodeSelector"))).map_err(|e| {
        format!(
            "pool {}: invalid label selector: {e}",
            pool.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// Whether MCO leaves the node alone: `kubernetes.io/os=windows` (WMCO's nodes).
pub fn is_windows(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OS_LABEL))
        .is_some_and(|v| v == "windows")
}

/// The pool MCO places `node` in, as `helpers.GetPrimaryPoolForNode` (over `ListPools` and
/// `GetPoolsForNode`, release-4.20) decides it: a Windows node is in none; pools whose selector
/// is nil or empty select nothing; of the pools whose selector matches, two or more custom
/// (neither `master` nor `worker`) pools put the node in none ("cannot proceed with this
/// Node"), one custom pool with `master` gives `master` ("defaulting to master"), one custom
/// pool otherwise gives that pool; else `master`, else `worker`. Any pool with an invalid
/// selector makes `ListPools` fail, and the node is in none.
pub fn primary_pool<'a>(node: &Node, pools: &'a [DynamicObject]) -> Option<&'a DynamicObject> {
    if is_windows(node) {
        return None;
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let (mut master, mut worker, mut custom) = (None, None, Vec::new());
    for pool in pools {
        let selector = pool_node_selector(pool).ok()?;
        if selector.selects_nothing_for_mco() || !selector.matches(labels) {
            continue;
        }
        match pool.metadata.name.as_deref() {
            Some("master") => master = Some(pool),
            Some("worker") => worker = Some(pool),
            _ => custom.push(pool),
        }
    }
    match custom.as_slice() {
        [] => master.or(worker),
        [one] => master.or(Some(*one)),
        _ => None,
    }
}

/// The nodes of `pool`: `helpers.GetNodesForPool`, the nodes whose [`primary_pool`] it is.
pub fn pool_members<'a>(
    pool: &DynamicObject,
    pools: &[DynamicObject],
    nodes: &'a [Node],
) -> Vec<&'a Node> {
    let Some(name) = pool.metadata.name.as_deref() else {
        return Vec::new();
    };
    nodes
        .iter()
        .filter(|n| primary_pool(n, pools).and_then(|p| p.metadata.name.as_deref()) == Some(name))
        .collect()
}

/// The rendered MachineConfig a pool targets: `spec.configuration.name`, or
/// `rendered-<pool>-0` when unset (there is no render controller in the harness).
pub fn pool_target_config(pool: &DynamicObject) -> String {
    str_at(&pool.data, &["spec", "configuration", "name"])
        .map(str::to_owned)
        .unwrap_or_else(|| format!("rendered-{}-0", pool.metadata.name.as_deref().unwrap_or("")))
}

/// A cluster-scoped kind `(group, version, kind, plural)`.
pub type Kind<'a> = (&'a str, &'a str, &'a str, &'a str);

/// The API of a cluster-scoped kind, as dynamic objects.
pub fn dynamic_api(
    client: &kube::Client,
    (group, version, kind, plural): Kind<'_>,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::all_with(client.clone(), &resource)
}

/// The ControllerConfig kind.
pub const CONTROLLER_CONFIGS: Kind<'static> = (
    "machineconfiguration.openshift.io",
    "v1",
    "ControllerConfig",
    "controllerconfigs",
);
/// The ImageDigestMirrorSet kind.
pub const IMAGE_DIGEST_MIRROR_SETS: Kind<'static> = (
    "config.openshift.io",
    "v1",
    "ImageDigestMirrorSet",
    "imagedigestmirrorsets",
);
