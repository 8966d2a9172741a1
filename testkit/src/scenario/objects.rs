//! MCO objects in a given state, written directly (no simulator): a built MachineOSConfig and a
//! pool's Updating condition, for tests that need a precise cluster state rather than a rollout.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::cluster::rendered_config;
use super::create::create_mosc;
use crate::Result;
use crate::mco::{self, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED};

/// A digested pull spec on a registry nobody contacts (the guard only compares references).
pub fn image(hex_byte: &str) -> String {
    format!(
        "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:{}",
        hex_byte.repeat(32)
    )
}

/// The metadata MCO gives a MachineOSBuild `name` of MOSC `pool`: the `machine-os-config`,
/// `target-machine-config-pool` (and, when known, `rendered-machine-config`) labels and a
/// controller reference to the MOSC, whose uid is read from the API server.
pub async fn owned_by_mosc(
    client: &kube::Client,
    pool: &str,
    name: &str,
    rendered: Option<&str>,
) -> Result<kube::api::ObjectMeta> {
    let config = mco::moscs(client).get(pool).await?;
    let mut labels: std::collections::BTreeMap<String, String> = [
        (LABEL_MOSC.to_owned(), pool.to_owned()),
        (LABEL_POOL.to_owned(), pool.to_owned()),
    ]
    .into();
    if let Some(r) = rendered {
        labels.insert(LABEL_RENDERED.to_owned(), r.to_owned());
    }
    Ok(kube::api::ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels),
        owner_references: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: format!("{}/v1", mco::GROUP),
                kind: "MachineOSConfig".to_owned(),
                name: pool.to_owned(),
                uid: config.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]),
        ..Default::default()
    })
}

/// Creates MOSC `pool` and a succeeded MachineOSBuild of it whose image is `image`, with the
/// labels, spec and status MCO 4.20 writes, and the MOSC's status naming that image.
pub async fn create_built_mosc(client: &kube::Client, pool: &str, image: &str) -> Result<()> {
    let repo = image.split_once('@').ok_or("image without a digest")?.0;
    create_mosc(client, pool, &format!("{repo}:latest")).await?;
    let build = format!("{pool}-{}", &image[image.len() - 12..]);
    let rendered = rendered_config(pool);
    let mut mosb = DynamicObject::new(&build, &mco::mosb_resource()).data(json!({
        "spec": {
            "machineConfig": {"name": rendered},
            "machineOSConfig": {"name": pool},
            "renderedImagePushSpec": format!("{repo}:{build}"),
        }
    }));
    mosb.metadata = owned_by_mosc(client, pool, &build, Some(&rendered)).await?;
    mco::mosbs(client)
        .create(&Default::default(), &mosb)
        .await?;
    let now = "2026-11-30T00:00:00Z";
    mco::mosbs(client)
        .patch_status(
            &build,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "digestedImagePushSpec": image,
                "conditions": [{"type": "Succeeded", "status": "True", "reason": "Ready",
                                "message": "built", "lastTransitionTime": now}],
            }})),
        )
        .await?;
    mco::moscs(client)
        .patch_status(
            pool,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"currentImagePullSpec": image}})),
        )
        .await?;
    // 4.20 names the current build by annotation only (no status.machineOSBuild).
    mco::moscs(client)
        .patch(
            pool,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {mco::CURRENT_MOSB: build}}})),
        )
        .await?;
    Ok(())
}

/// Pauses or unpauses the pool (`spec.paused`): a paused pool gets no further node sent to a
/// new image, which is what the pool rule reads.
pub async fn set_pool_paused(client: &kube::Client, pool: &str, paused: bool) -> Result<()> {
    mco::mcps(client)
        .patch(
            pool,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await?;
    Ok(())
}

/// Creates a Windows node as the Windows Machine Config Operator (WMCO) leaves it: the
/// `node-role.kubernetes.io/worker` role label and `kubernetes.io/os=windows`, and no MCO
/// annotation (MCO never manages it, so it never gets a config or an image).
pub async fn create_windows_node(client: &kube::Client, name: &str) -> Result<()> {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "node-role.kubernetes.io/worker": "",
                "kubernetes.io/hostname": name,
                mco::OS_LABEL: "windows",
                "node.kubernetes.io/windows-build": "10.0.20348",
            },
        },
    }))?;
    mco::nodes(client)
        .create(&Default::default(), &node)
        .await?;
    tracing::info!("objects: created Windows node {name}");
    Ok(())
}
