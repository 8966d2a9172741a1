//! Reading what happened, for assertions: node annotations, pool conditions, a config's
//! builds, Events, the registry; kubectl as the admin runs it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

use super::cluster::{Cluster, Rollout};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::kubectl::KubectlOutput;
use crate::mco::{self, DESIRED_IMAGE, LABEL_MOSC};

/// All annotations of a node.
pub async fn node_annotations(
    client: &kube::Client,
    node: &str,
) -> Result<BTreeMap<String, String>> {
    Ok(mco::nodes(client)
        .get(node)
        .await?
        .metadata
        .annotations
        .unwrap_or_default())
}

/// One annotation of a node (`key` is the full key, e.g. [`mco::DESIRED_IMAGE`]).
pub async fn node_annotation(
    client: &kube::Client,
    node: &str,
    key: &str,
) -> Result<Option<String>> {
    Ok(node_annotations(client, node)
        .await?
        .remove(key)
        .filter(|v| !v.is_empty()))
}

/// A condition of a MachineConfigPool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCondition {
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl PoolCondition {
    /// Whether the status is "True".
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The pool's conditions by type.
pub async fn pool_conditions(
    client: &kube::Client,
    pool: &str,
) -> Result<BTreeMap<String, PoolCondition>> {
    let pool = mco::mcps(client).get(pool).await?;
    let text = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(mco::conditions(&pool)
        .iter()
        .map(|c| {
            let cond = PoolCondition {
                status: text(c, "status"),
                reason: text(c, "reason"),
                message: text(c, "message"),
            };
            (text(c, "type"), cond)
        })
        .collect())
}

/// One condition of the pool, if reported.
pub async fn pool_condition(
    client: &kube::Client,
    pool: &str,
    type_: &str,
) -> Result<Option<PoolCondition>> {
    Ok(pool_conditions(client, pool).await?.remove(type_))
}

/// The MachineOSBuilds of a MOSC (by the machine-os-config label).
pub async fn mosbs_of(client: &kube::Client, mosc: &str) -> Result<Vec<DynamicObject>> {
    let selector = format!("{LABEL_MOSC}={mosc}");
    Ok(mco::mosbs(client)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Events (events.k8s.io/v1, namespace `default`, where Events about cluster-scoped objects
/// live) about the `kind` object `name` with `reason`.
pub async fn events_about(
    client: &kube::Client,
    kind: &str,
    name: &str,
    reason: &str,
) -> Vec<Event> {
    let api: kube::Api<Event> = kube::Api::namespaced(client.clone(), "default");
    api.list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            let regarding = e.regarding.as_ref();
            e.reason.as_deref() == Some(reason)
                && regarding.and_then(|r| r.name.as_deref()) == Some(name)
                && regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
        })
        .collect()
}

/// The abbreviated image the denial names: `.../ocb-image@sha256:<12 hex>...`.
pub fn short_image(rollout: &Rollout) -> String {
    let digest = rollout
        .build
        .image_ref()
        .expect("image reference")
        .digest
        .expect("digest");
    format!(".../ocb-image@{}...", &digest[..7 + 12])
}

/// Asserts the rollout's node mid-update still desires the build's image, whatever happened to
/// the image (`what` for the message).
pub async fn assert_keeps_desired_image(cluster: &Cluster, rollout: &Rollout, what: &str) {
    assert_eq!(
        node_annotation(&cluster.client, &rollout.node, DESIRED_IMAGE)
            .await
            .expect("read node"),
        Some(rollout.build.image.clone()),
        "{what}"
    );
}

/// Asserts the registry still serves the build's image (`manifest_status` is `None` while the
/// manifest is there).
pub async fn assert_image_in_registry(cluster: &Cluster, image: &ImageRef) {
    let digest = image.digest.clone().expect("image has a digest");
    assert_eq!(
        cluster
            .registry
            .manifest_status(&image.repo, &digest)
            .await
            .expect("registry"),
        None,
        "the image is still in the registry"
    );
}

/// Runs kubectl against the cluster as the admin; panics only if kubectl cannot run.
pub async fn kubectl<const N: usize>(cluster: &Cluster, args: [&str; N]) -> KubectlOutput {
    let shown = args.join(" ");
    cluster
        .cp
        .kubectl(args)
        .await
        .unwrap_or_else(|e| panic!("running kubectl {shown}: {e}"))
}

/// The finalizers of an object.
pub fn finalizers(obj: &DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

/// A server-side dry run of deleting MachineOSConfig `name`: `Ok` if admitted, else the API
/// server's message (or that it did not answer within 30 s).
pub async fn dry_run_delete(client: &kube::Client, name: &str) -> Result<(), String> {
    let params = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let api = mco::moscs(client);
    match tokio::time::timeout(Duration::from_secs(30), api.delete(name, &params)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 30 s".into()),
    }
}

/// How the API server relays the guard's refusal of a deletion (its validating webhook's name).
pub const REFUSED_BY_GUARD: &str =
    "admission webhook \"deletions.mosc-guard.dev\" denied the request";

/// Whether kubectl's `delete machineosconfig worker` (`out`) was refused by the guard because
/// `rollout`'s node is mid-update: the webhook's refusal, the MachineOSConfig's message and the
/// node's name. `Err` says what is missing.
pub fn refused_mid_rollout(out: &KubectlOutput, rollout: &Rollout) -> Result<(), String> {
    if out.success() {
        return Err(format!("the delete was not refused: {out:?}"));
    }
    for want in [
        REFUSED_BY_GUARD,
        "machineosconfig \"worker\" cannot be deleted yet",
        rollout.node.as_str(),
    ] {
        if !out.stderr.contains(want) {
            return Err(format!("missing {want:?} in {}", out.stderr));
        }
    }
    Ok(())
}

/// The warning defer mode's webhook gives when it admits MachineOSConfig `worker`'s deletion and
/// defers it while `rollout`'s node still needs the image.
pub fn deferral_warning(rollout: &Rollout) -> String {
    format!(
        "Warning: mosc-guard: deletion of machineosconfig \"worker\" deferred: 1 node still needs an image built from it ({}); it completes when the rollout settles",
        rollout.node
    )
}
