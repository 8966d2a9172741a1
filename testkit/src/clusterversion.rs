//! The cluster's ClusterVersion (`clusterversions.config.openshift.io/version`) as the
//! cluster-version operator writes it: a release that is installed ([`set_release`]), an upgrade
//! in flight ([`start_upgrade`]: `history[0]` Partial for the target with `completionTime: null`,
//! `history[1]` Completed for the previous release, Progressing=True, `desired` the target) and
//! its completion ([`finish_upgrade`]). Every object is one a real API server accepts: every
//! field the release CRD requires is written (`tests/crds/clusterversions.yaml` is as strict).
//!
//! The status is written whole with a PUT of the status subresource (read, change, replace), so
//! `completionTime` can be an explicit `null`, as the operator writes it.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::FIELD_MANAGER;
use crate::Result;

/// The singleton's name.
pub const NAME: &str = "version";
/// The cluster ID the kit's control planes report.
pub const CLUSTER_ID: &str = "00000000-0000-4000-8000-000000000e2e";

/// ApiResource of ClusterVersion.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    )
}

/// The ClusterVersion API.
pub fn api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource())
}

/// The release image of `version`, as the cluster-version operator names it (a stand-in digest
/// derived from the version).
pub fn release_image(version: &str) -> String {
    let digest = hex(&Sha256::digest(format!("ocp-release-{version}").as_bytes()));
    format!("quay.io/openshift-release-dev/ocp-release@sha256:{digest}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One `status.history[]` entry.
fn entry(version: &str, started: &str, completed: Option<&str>) -> Value {
    json!({
        "state": if completed.is_some() { "Completed" } else { "Partial" },
        "startedTime": started,
        "completionTime": completed,
        "version": version,
        "image": release_image(version),
        "verified": false,
    })
}

/// The conditions the operator keeps, with Progressing as given.
fn conditions(now: &str, progressing: bool, message: &str) -> Value {
    json!([
        {"type": "Available", "status": "True", "lastTransitionTime": now,
         "message": message},
        {"type": "Failing", "status": "False", "lastTransitionTime": now},
        {"type": "Progressing", "status": if progressing { "True" } else { "False" },
         "lastTransitionTime": now, "message": message},
        {"type": "RetrievedUpdates", "status": "False", "lastTransitionTime": now,
         "reason": "NoChannel", "message": "The update channel has not been configured."},
    ])
}

/// The whole status: `history` newest first, `desired` the newest entry's release.
fn status(generation: i64, history: Vec<Value>, progressing: bool) -> Value {
    let target = history
        .first()
        .and_then(|h| h.get("version"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let now = now();
    let message = if progressing {
        format!("Working towards {target}")
    } else {
        format!("Cluster version is {target}")
    };
    let hash = Sha256::digest(format!("{target}/{}", release_image(&target)).as_bytes());
    json!({
        "availableUpdates": null,
        "desired": {"version": target, "image": release_image(&target)},
        "history": history,
        "observedGeneration": generation,
        "versionHash": hex(&hash[..8]),
        "conditions": conditions(&now, progressing, &message),
    })
}

/// Now, at second precision.
fn now() -> String {
    Timestamp::from_second(Timestamp::now().as_second())
        .unwrap_or_else(|_| Timestamp::now())
        .to_string()
}

/// The ClusterVersion, created with its spec if there is none yet.
async fn ensure(client: &kube::Client) -> Result<DynamicObject> {
    let object = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": NAME},
        "spec": {"clusterID": CLUSTER_ID, "channel": "stable"},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Ok(api(client)
        .patch(NAME, &params, &Patch::Apply(&object))
        .await?)
}

/// Replaces the status with `status` (a PUT of the status subresource).
async fn replace_status(client: &kube::Client, mut cv: DynamicObject, status: Value) -> Result<()> {
    cv.data["status"] = status;
    api(client)
        .replace_status(NAME, &PostParams::default(), &cv)
        .await?;
    Ok(())
}

/// `status.history` as it is now (newest first).
fn history_of(cv: &DynamicObject) -> Vec<Value> {
    cv.data
        .pointer("/status/history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Makes the cluster say it runs `version` (installed, or upgraded to it long ago): one
/// Completed history entry, Progressing=False.
pub async fn set_release(client: &kube::Client, version: &str) -> Result<()> {
    let cv = ensure(client).await?;
    let generation = cv.metadata.generation.unwrap_or(1);
    let now = now();
    let history = vec![entry(version, &now, Some(&now))];
    replace_status(client, cv, status(generation, history, false)).await
}

/// An upgrade to `target` in flight: `history[0]` Partial for `target` (`completionTime`
/// null), the previous entries after it (`history[1]` the Completed release the cluster ran),
/// Progressing=True and `desired` = `target`. Errs if an upgrade is already in flight.
pub async fn start_upgrade(client: &kube::Client, target: &str) -> Result<()> {
    let cv = ensure(client).await?;
    let mut history = history_of(&cv);
    match history
        .first()
        .and_then(|h| h.get("state"))
        .and_then(Value::as_str)
    {
        Some("Completed") => {}
        other => {
            return Err(format!(
                "an upgrade to {target} needs a Completed release first (history[0] is {other:?})"
            )
            .into());
        }
    }
    history.insert(0, entry(target, &now(), None));
    let generation = cv.metadata.generation.unwrap_or(1);
    replace_status(client, cv, status(generation, history, true)).await
}

/// The upgrade in flight completes: `history[0]` becomes Completed (with its completion time)
/// and Progressing=False. Errs if no upgrade is in flight.
pub async fn finish_upgrade(client: &kube::Client) -> Result<()> {
    let cv = ensure(client).await?;
    let mut history = history_of(&cv);
    let Some(newest) = history.first_mut().filter(|h| h["state"] == "Partial") else {
        return Err("no upgrade in flight (history[0] is not Partial)".into());
    };
    newest["state"] = json!("Completed");
    newest["completionTime"] = json!(now());
    let generation = cv.metadata.generation.unwrap_or(1);
    replace_status(client, cv, status(generation, history, false)).await
}

/// The ClusterVersion's `status.desired.version` (the target during an upgrade).
pub async fn desired_version(client: &kube::Client) -> Result<Option<String>> {
    let cv = api(client).get_opt(NAME).await?;
    Ok(cv.and_then(|cv| {
        cv.data
            .pointer("/status/desired/version")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }))
}
