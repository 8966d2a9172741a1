//! Creating what the scenario runs on: pools, nodes, MachineOSConfigs, MCO's namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::cluster::rendered_config;
use crate::Result;
use crate::mco::{self, CURRENT_CONFIG, DESIRED_CONFIG, STATE, STATE_DONE};
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

/// Creates plain Linux Node objects carrying `labels` (e.g. several role labels), settled on
/// `rendered_config` as MCO leaves them (state Done, current = desired config, no image
/// annotations).
pub async fn create_labelled_nodes(
    client: &kube::Client,
    names: &[String],
    labels: &[(&str, &str)],
    rendered_config: &str,
) -> Result<()> {
    for name in names {
        let mut node_labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), name.clone()),
            (mco::OS_LABEL.to_owned(), "linux".to_owned()),
            ("node.openshift.io/os_id".to_owned(), "rhel".to_owned()),
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
                },
            },
        }))?;
        mco::nodes(client)
            .create(&PostParams::default(), &node)
            .await?;
    }
    tracing::info!(
        "scenario: created {} nodes: {}",
        names.len(),
        names.join(", ")
    );
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
