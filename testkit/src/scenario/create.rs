//! Creating what the scenario runs on: pools and their rendered MachineConfigs (what MCO's
//! render controller makes), nodes (as MCO and the kubelet leave them), MachineOSConfigs, MCO's
//! namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::cluster::rendered_config;
use crate::Result;
use crate::mco::{
    self, CONTROL_PLANE_TOPOLOGY, CURRENT_CONFIG, DESIRED_CONFIG, DESIRED_DRAIN,
    LAST_APPLIED_DRAIN, STATE, STATE_DONE, TOPOLOGY_HIGHLY_AVAILABLE, TOPOLOGY_SINGLE_REPLICA,
    uncordon_request,
};
use crate::simulator::MCO_NAMESPACE;

/// Creates a MachineConfigPool selecting nodes labelled `<role_label>: ""`.
pub async fn create_pool(
    client: &kube::Client,
    name: &str,
    role_label: &str,
    max_unavailable: u32,
) -> Result<()> {
    create_pool_selecting(
        client,
        name,
        json!({"matchLabels": {role_label: ""}}),
        max_unavailable,
    )
    .await
}

/// Creates a MachineConfigPool whose `spec.nodeSelector` is `node_selector` (a
/// `metav1.LabelSelector`, e.g. `{}` for one that MCO treats as selecting nothing).
pub async fn create_pool_selecting(
    client: &kube::Client,
    name: &str,
    node_selector: Value,
    max_unavailable: u32,
) -> Result<()> {
    let mut pool = DynamicObject::new(name, &mco::mcp_resource()).data(json!({
        "spec": {
            "nodeSelector": node_selector,
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "maxUnavailable": max_unavailable,
            "paused": false,
            "configuration": {"name": rendered_config(name)},
        }
    }));
    pool.metadata.labels = Some(BTreeMap::from([(
        format!("pools.operator.machineconfiguration.openshift.io/{name}"),
        String::new(),
    )]));
    mco::mcps(client)
        .create(&PostParams::default(), &pool)
        .await?;
    create_rendered_config(client, name, &rendered_config(name)).await?;
    tracing::info!(
        "scenario: created MachineConfigPool {name} (nodeSelector {node_selector}, maxUnavailable \
         {max_unavailable})"
    );
    Ok(())
}

/// Creates plain Node objects in the pool of `role_label`, settled on `rendered_config` as MCO
/// leaves them (state Done, current = desired config, no image annotations).
pub async fn create_nodes(
    client: &kube::Client,
    names: &[String],
    role_label: &str,
    rendered_config: &str,
) -> Result<()> {
    create_labelled_nodes(client, names, &[(role_label, "")], rendered_config).await
}

/// The region label and value of the kit's nodes (AWS's, like their names).
const REGION_LABEL: &str = "topology.kubernetes.io/region";
const REGION: &str = "us-east-2";

/// The zone of the `i`-th node of a list: the region's three zones in turn, so that the node
/// controller, which takes candidates by zone when it cannot take them all, takes a pool of
/// three in the list's order.
fn zone(i: usize) -> String {
    let letter = ['a', 'b', 'c'][i % 3];
    format!("{REGION}{letter}")
}

/// Creates plain Linux Node objects carrying `labels` (e.g. several role labels), settled on
/// `rendered_config` as MCO leaves them (state Done, current = desired config, no image
/// annotations, uncordoned after the daemon's last update: `desiredDrain` = `lastAppliedDrain`
/// = `uncordon-<config>`, on a multi-node cluster) and Ready with a boot ID, as the kubelet
/// reports it ([`crate::kubelet`]), in the region's zones in turn ([`mco::ZONE_LABEL`]).
pub async fn create_labelled_nodes(
    client: &kube::Client,
    names: &[String],
    labels: &[(&str, &str)],
    rendered_config: &str,
) -> Result<()> {
    for (i, name) in names.iter().enumerate() {
        let mut node_labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), name.clone()),
            (mco::OS_LABEL.to_owned(), "linux".to_owned()),
            ("node.openshift.io/os_id".to_owned(), "rhel".to_owned()),
            (REGION_LABEL.to_owned(), REGION.to_owned()),
            (mco::ZONE_LABEL.to_owned(), zone(i)),
        ]);
        node_labels.extend(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": node_labels,
                "annotations": {
                    CURRENT_CONFIG: rendered_config,
                    DESIRED_CONFIG: rendered_config,
                    STATE: STATE_DONE,
                    DESIRED_DRAIN: uncordon_request(rendered_config),
                    LAST_APPLIED_DRAIN: uncordon_request(rendered_config),
                    CONTROL_PLANE_TOPOLOGY: TOPOLOGY_HIGHLY_AVAILABLE,
                },
            },
        }))?;
        mco::nodes(client)
            .create(&PostParams::default(), &node)
            .await?;
        crate::kubelet::report_boot(client, name).await?;
    }
    tracing::info!(
        "scenario: created {} nodes: {}",
        names.len(),
        names.join(", ")
    );
    Ok(())
}

/// Makes `node` a single-node cluster's (`controlPlaneTopology: SingleReplica`, as MCO's node
/// controller copies it from the cluster's infrastructure): its daemon never drains it.
pub async fn set_single_node(client: &kube::Client, node: &str) -> Result<()> {
    let patch =
        json!({"metadata": {"annotations": {CONTROL_PLANE_TOPOLOGY: TOPOLOGY_SINGLE_REPLICA}}});
    mco::nodes(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Creates the rendered MachineConfig `name` of pool `pool` unless it exists, shaped as MCO's
/// render controller writes one (`generateRenderedMachineConfig`): owned by the pool (a
/// controller reference, so it goes with the pool), its Ignition config, the base OS image of the
/// release (`osImageURL`, what a node leaving image mode rebases to).
pub async fn create_rendered_config(client: &kube::Client, pool: &str, name: &str) -> Result<()> {
    let api = mco::mcs(client);
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let owner = mco::mcps(client).get(pool).await?;
    let digest: String = Sha256::digest(name.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut config = DynamicObject::new(name, &mco::mc_resource()).data(json!({
        "spec": {
            "config": {"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core"}]}},
            "osImageURL": format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{digest}"),
            "extensions": [],
            "fips": false,
            "kernelArguments": [],
            "kernelType": "default",
        }
    }));
    config.metadata.annotations = Some(BTreeMap::from([(
        "machineconfiguration.openshift.io/generated-by-controller-version".to_owned(),
        "5b1d6a1e0a7c3f2b9e8d4c6a1f0b2e3d4c5a6b7e".to_owned(),
    )]));
    config.metadata.owner_references = Some(vec![OwnerReference {
        api_version: format!("{}/v1", mco::GROUP),
        kind: "MachineConfigPool".to_owned(),
        name: pool.to_owned(),
        uid: owner.metadata.uid.unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    match api.create(&PostParams::default(), &config).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!("scenario: created rendered MachineConfig {name} of pool {pool}");
    Ok(())
}

/// Creates the namespace MCO's build objects live in (the installer creates it on a real
/// cluster; the simulator's builds need it).
pub async fn create_mco_namespace(client: &kube::Client) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": MCO_NAMESPACE},
    }))?;
    let api: Api<Namespace> = Api::all(client.clone());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates the MachineOSConfig `pool` (its name must equal the pool's) pushing to `push_spec`.
pub async fn create_mosc(client: &kube::Client, pool: &str, push_spec: &str) -> Result<()> {
    create_mosc_annotated(client, pool, push_spec, &[]).await
}

/// [`create_mosc`] with `annotations` on the MOSC from its creation (e.g. a pre-built image).
pub async fn create_mosc_annotated(
    client: &kube::Client,
    pool: &str,
    push_spec: &str,
    annotations: &[(&str, &str)],
) -> Result<()> {
    let mut mosc = DynamicObject::new(pool, &mco::mosc_resource()).data(json!({
        "spec": {
            "machineConfigPool": {"name": pool},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": push_spec,
            "containerFile": [{"containerfileArch": "NoArch",
                               "content": "FROM configs AS final\nRUN dnf install -y cowsay && dnf clean all\n"}],
        }
    }));
    if !annotations.is_empty() {
        mosc.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
    }
    mco::moscs(client)
        .create(&PostParams::default(), &mosc)
        .await?;
    tracing::info!("scenario: created MachineOSConfig {pool} pushing to {push_spec}");
    Ok(())
}
