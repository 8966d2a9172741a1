//! The objects of one build, as the 4.20 machine-os-builder creates them in
//! `openshift-machine-config-operator`: the Job `build-<mosb>` (controller ownerReference to the
//! MOSB), the ephemeral ConfigMaps `containerfile-`, `mc-`, `additionaltrustbundle-` and Secrets
//! `base-`, `final-` (owned by the Job, not blocking), all deleted once the build succeeded;
//! and the ConfigMap `digest-<mosb>` (key `digest`, no owner) the build pod leaves with its
//! result, which stays until the MOSB-delete handler removes it.
//!
//! Plain core objects (no Pod runs: the harness has no Job controller or scheduler).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::ctx::Ctx;
use super::reconcile::{is_conflict, is_not_found};
use crate::Result;
use crate::mco::{GROUP, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED, str_at};

/// Namespace of MCO's build objects (it exists on every cluster; the harness creates it).
pub const MCO_NAMESPACE: &str = crate::mco::MOB_NAMESPACE;
/// MOSB annotation: uid of its build Job.
pub const JOB_UID_ANNOTATION: &str = "machineconfiguration.openshift.io/job-uid";
/// Label on every object of a build except the MOSB: marks it as ephemeral.
const LABEL_EPHEMERAL: &str = "machineconfiguration.openshift.io/ephemeral-build-object";
/// Label on everything the build controller creates.
const LABEL_LAYERING: &str = "machineconfiguration.openshift.io/on-cluster-layering";
/// Label and annotation naming the build.
const LABEL_MOSB: &str = "machineconfiguration.openshift.io/machine-os-build";

/// `build-<mosb>`.
pub fn job_name(mosb: &str) -> String {
    format!("build-{mosb}")
}

/// `digest-<mosb>`.
pub fn digest_configmap_name(mosb: &str) -> String {
    format!("digest-{mosb}")
}

/// The ephemeral ConfigMaps of a build.
fn ephemeral_configmaps(mosb: &str) -> [String; 3] {
    [
        format!("containerfile-{mosb}"),
        format!("mc-{mosb}"),
        format!("additionaltrustbundle-{mosb}"),
    ]
}

/// The ephemeral Secrets of a build (the canonicalized pull and push secrets).
fn ephemeral_secrets(mosb: &str) -> [String; 2] {
    [format!("base-{mosb}"), format!("final-{mosb}")]
}

fn configmaps(ctx: &Ctx) -> Api<ConfigMap> {
    Api::namespaced(ctx.client.clone(), MCO_NAMESPACE)
}

fn secrets(ctx: &Ctx) -> Api<Secret> {
    Api::namespaced(ctx.client.clone(), MCO_NAMESPACE)
}

fn jobs(ctx: &Ctx) -> Api<Job> {
    Api::namespaced(ctx.client.clone(), MCO_NAMESPACE)
}

/// What names a build: the MOSB, its MOSC, pool and rendered config.
struct BuildNames {
    mosb: String,
    mosc: String,
    pool: String,
    rendered: String,
}

impl BuildNames {
    fn of(mosb: &DynamicObject) -> Self {
        let label = |key: &str| mosb.labels().get(key).cloned().unwrap_or_default();
        Self {
            mosb: mosb.name_any(),
            mosc: str_at(&mosb.data, &["spec", "machineOSConfig", "name"])
                .map(str::to_owned)
                .unwrap_or_else(|| label(LABEL_MOSC)),
            pool: label(LABEL_POOL),
            rendered: str_at(&mosb.data, &["spec", "machineConfig", "name"])
                .map(str::to_owned)
                .unwrap_or_else(|| label(LABEL_RENDERED)),
        }
    }

    /// `getLabelsForObjectMeta`.
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_EPHEMERAL.to_owned(), String::new()),
            (LABEL_LAYERING.to_owned(), String::new()),
            (LABEL_RENDERED.to_owned(), self.rendered.clone()),
            (LABEL_POOL.to_owned(), self.pool.clone()),
            (LABEL_MOSC.to_owned(), self.mosc.clone()),
            (LABEL_MOSB.to_owned(), self.mosb.clone()),
        ])
    }

    /// `getAnnotationsForObjectMeta`.
    fn annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MOSC.to_owned(), self.mosc.clone()),
            (LABEL_MOSB.to_owned(), self.mosb.clone()),
        ])
    }

    /// The cleaner's selector (`EphemeralBuildObjectSelectorForSpecificBuild`).
    fn cleanup_selector(&self) -> String {
        format!(
            "{LABEL_EPHEMERAL},{LABEL_LAYERING},{LABEL_RENDERED}={},{LABEL_POOL}={}",
            self.rendered, self.pool
        )
    }
}

/// Starts a build as `jobImageBuilder.start` does: the ephemeral ConfigMaps and Secrets, the
/// Job owned by the MOSB, the Job's uid in the MOSB's `job-uid` annotation, and the Job as the
/// (non-controller, non-blocking) owner of the ConfigMaps and Secrets. A Job left by an earlier
/// start is reused.
pub(super) async fn start_build_objects(
    ctx: &Ctx,
    mosc: &DynamicObject,
    mosb: &DynamicObject,
) -> Result<()> {
    let names = BuildNames::of(mosb);
    let containerfile = mosc
        .data
        .get("spec")
        .and_then(|s| s.get("containerFile"))
        .and_then(|c| c.as_array())
        .and_then(|c| c.first())
        .and_then(|c| c.get("content"))
        .and_then(|c| c.as_str())
        .unwrap_or("FROM configs AS final\n");
    let [containerfile_cm, mc_cm, bundle_cm] = ephemeral_configmaps(&names.mosb);
    let configmaps_data = [
        (
            containerfile_cm,
            json!({"data": {"Containerfile": format!("FROM base AS configs\n{containerfile}")}}),
        ),
        (
            mc_cm,
            // MCO stores the rendered MachineConfig gzipped and base64-encoded; nobody reads it
            // here, so a placeholder naming it.
            json!({"data": {"machineconfig.json.gz": names.rendered}}),
        ),
        (
            bundle_cm,
            json!({"binaryData": {"openshift-config-user-ca-bundle.crt": ""}}),
        ),
    ];
    for (name, data) in &configmaps_data {
        let mut cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": MCO_NAMESPACE,
                         "labels": names.labels(), "annotations": names.annotations()},
        });
        merge(&mut cm, data);
        let cm: ConfigMap = serde_json::from_value(cm)?;
        create_or_keep(
            ctx,
            &format!("creating ConfigMap {name}"),
            &configmaps(ctx),
            &cm,
        )
        .await?;
    }
    for name in ephemeral_secrets(&names.mosb) {
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": MCO_NAMESPACE,
                         "labels": names.labels(), "annotations": names.annotations()},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": "{\"auths\":{}}"},
        }))?;
        create_or_keep(
            ctx,
            &format!("creating Secret {name}"),
            &secrets(ctx),
            &secret,
        )
        .await?;
    }

    let job = build_job(&names, mosb)?;
    let job_name = job_name(&names.mosb);
    let job = match ctx
        .write(
            &format!("creating Job {job_name}"),
            jobs(ctx).create(&PostParams::default(), &job),
        )
        .await
    {
        Ok(created) => created,
        Err(e) if is_conflict(&e) => jobs(ctx).get(&job_name).await?,
        Err(e) => return Err(format!("creating Job {job_name}: {e}").into()),
    };
    let job_uid = job.uid().unwrap_or_default();
    let patch = json!({"metadata": {"annotations": {JOB_UID_ANNOTATION: job_uid}}});
    match ctx
        .write(
            &format!("annotating MachineOSBuild {} with its Job", names.mosb),
            crate::mco::mosbs(&ctx.client).patch(
                &names.mosb,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid,
        "controller": false, "blockOwnerDeletion": false,
    }]}});
    for name in ephemeral_configmaps(&names.mosb) {
        ctx.write(
            &format!("setting the owner of ConfigMap {name}"),
            configmaps(ctx).patch(&name, &PatchParams::default(), &Patch::Merge(&owner)),
        )
        .await?;
    }
    for name in ephemeral_secrets(&names.mosb) {
        ctx.write(
            &format!("setting the owner of Secret {name}"),
            secrets(ctx).patch(&name, &PatchParams::default(), &Patch::Merge(&owner)),
        )
        .await?;
    }
    tracing::info!(
        "sim build: Job {MCO_NAMESPACE}/{job_name} (uid {job_uid}) and its ConfigMaps and Secrets \
         created for {}",
        names.mosb
    );
    Ok(())
}

/// The build Job (`podToJob` of the buildah pod, reduced to what an API server validates).
fn build_job(names: &BuildNames, mosb: &DynamicObject) -> Result<Job> {
    let owner = OwnerReference {
        api_version: format!("{GROUP}/v1"),
        kind: "MachineOSBuild".to_owned(),
        name: names.mosb.clone(),
        uid: mosb.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let tag = str_at(&mosb.data, &["spec", "renderedImagePushSpec"]).unwrap_or_default();
    let [containerfile_cm, mc_cm, bundle_cm] = ephemeral_configmaps(&names.mosb);
    let [base_secret, final_secret] = ephemeral_secrets(&names.mosb);
    let env = json!([
        {"name": "DIGEST_CONFIGMAP_NAME", "value": digest_configmap_name(&names.mosb)},
        {"name": "TAG", "value": tag},
    ]);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(&names.mosb), "namespace": MCO_NAMESPACE,
                     "labels": names.labels(), "annotations": names.annotations(),
                     "ownerReferences": [owner]},
        "spec": {
            "backoffLimit": 3,
            "completions": 1,
            "template": {"spec": {
                "restartPolicy": "Never",
                "serviceAccountName": "machine-os-builder",
                "terminationGracePeriodSeconds": 10,
                "initContainers": [{
                    "name": "image-build",
                    "image": "quay.io/openshift/origin-machine-config-operator:4.20",
                    "command": ["/bin/bash", "-c", "exec /usr/bin/buildah-build.sh"],
                    "env": env,
                    "volumeMounts": [
                        {"name": "containerfile", "mountPath": "/tmp/containerfile"},
                        {"name": "machineconfig", "mountPath": "/tmp/machineconfig"},
                        {"name": "additional-trust-bundle", "mountPath": "/etc/pki/ca-trust/source/anchors"},
                        {"name": "base-image-pull-creds", "mountPath": "/tmp/base-image-pull-creds"},
                        {"name": "final-image-push-creds", "mountPath": "/tmp/final-image-push-creds"},
                        {"name": "done", "mountPath": "/tmp/done"},
                    ],
                }],
                "containers": [{
                    "name": "create-digest-configmap",
                    "image": "quay.io/openshift/origin-machine-config-operator:4.20",
                    "command": ["/bin/bash", "-c", "exec /usr/bin/create-digest-cm.sh"],
                    "env": env,
                    "volumeMounts": [{"name": "done", "mountPath": "/tmp/done"}],
                }],
                "volumes": [
                    {"name": "containerfile", "configMap": {"name": containerfile_cm}},
                    {"name": "machineconfig", "configMap": {"name": mc_cm}},
                    {"name": "additional-trust-bundle", "configMap": {"name": bundle_cm}},
                    {"name": "base-image-pull-creds", "secret": {"secretName": base_secret,
                        "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}},
                    {"name": "final-image-push-creds", "secret": {"secretName": final_secret,
                        "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}},
                    {"name": "done", "emptyDir": {"medium": "Memory"}},
                ],
            }},
        },
    });
    Ok(serde_json::from_value(job)?)
}

/// What the build pod's `create-digest-configmap` container leaves: `digest-<mosb>` with the
/// pushed image's digest under `digest`, labelled like the build's objects, owned by nothing.
pub(super) async fn write_digest_configmap(
    ctx: &Ctx,
    mosb: &DynamicObject,
    digest: &str,
) -> Result<()> {
    let names = BuildNames::of(mosb);
    let name = digest_configmap_name(&names.mosb);
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": MCO_NAMESPACE, "labels": names.labels()},
        "data": {"digest": digest},
    }))?;
    match ctx
        .write(
            &format!("creating ConfigMap {name}"),
            configmaps(ctx).create(&PostParams::default(), &cm),
        )
        .await
    {
        Ok(_) => Ok(()),
        // `oc apply` over one left by an earlier build of the same name.
        Err(e) if is_conflict(&e) => {
            let patch = json!({"data": {"digest": digest}});
            ctx.write(
                &format!("updating ConfigMap {name}"),
                configmaps(ctx).patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// `jobImageBuilder.Clean`: deletes the build's Job (foreground, only if its uid is the MOSB's
/// `job-uid`: a rebuild of the same name has a new Job) and the ConfigMaps and Secrets of the
/// build that Job owns. The digest ConfigMap (no owner) stays.
pub(super) async fn clean_build_objects(ctx: &Ctx, mosb: &DynamicObject) -> Result<()> {
    let names = BuildNames::of(mosb);
    let job_uid = mosb
        .annotations()
        .get(JOB_UID_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    let job_name = job_name(&names.mosb);
    if let Some(job) = jobs(ctx).get_opt(&job_name).await?
        && job.uid().as_deref() == Some(job_uid.as_str())
    {
        match ctx
            .write(
                &format!("deleting Job {job_name}"),
                jobs(ctx).delete(&job_name, &DeleteParams::foreground()),
            )
            .await
        {
            Ok(_) => tracing::info!("sim build: deleted build Job {job_name}"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let selector = names.cleanup_selector();
    let params = ListParams::default().labels(&selector);
    for cm in configmaps(ctx).list(&params).await?.items {
        if owned_by(&cm, &job_uid) {
            delete_ignoring_missing(ctx, &configmaps(ctx), &cm.name_any(), "ConfigMap").await?;
        }
    }
    for secret in secrets(ctx).list(&params).await?.items {
        if owned_by(&secret, &job_uid) {
            delete_ignoring_missing(ctx, &secrets(ctx), &secret.name_any(), "Secret").await?;
        }
    }
    Ok(())
}

/// Deletes `digest-<mosb>` (absent is fine).
pub(super) async fn delete_digest_configmap(ctx: &Ctx, mosb: &str) -> Result<()> {
    delete_ignoring_missing(
        ctx,
        &configmaps(ctx),
        &digest_configmap_name(mosb),
        "ConfigMap",
    )
    .await
}

fn owned_by<K: Resource>(obj: &K, uid: &str) -> bool {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == uid)
}

async fn delete_ignoring_missing<K>(ctx: &Ctx, api: &Api<K>, name: &str, kind: &str) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match ctx
        .write(
            &format!("deleting {kind} {name}"),
            api.delete(name, &DeleteParams::default()),
        )
        .await
    {
        Ok(_) => {
            tracing::debug!("sim build: deleted {kind} {MCO_NAMESPACE}/{name}");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates `obj`, keeping one that already exists (the preparer ignores AlreadyExists).
async fn create_or_keep<K>(ctx: &Ctx, what: &str, api: &Api<K>, obj: &K) -> Result<()>
where
    K: Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match ctx
        .write(what, api.create(&PostParams::default(), obj))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e) => Err(format!("{what}: {e}").into()),
    }
}

/// Merges the keys of `extra` (an object) into `base` (an object).
fn merge(base: &mut serde_json::Value, extra: &serde_json::Value) {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
}
