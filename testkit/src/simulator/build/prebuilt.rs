//! 4.21 on: a MOSC annotated `machineconfiguration.openshift.io/pre-built-image: <digested
//! image>` and naming no current build yet is seeded instead of built
//! (`seedMachineOSConfigWithExistingImage`, release-4.21 `reconciler.go`):
//!
//! 1. its push secret must exist in `openshift-machine-config-operator` (else an error, retried);
//! 2. a synthetic MOSB (`createSyntheticMachineOSBuild`) named as a build of the MOSC for the
//!    pool's `spec.configuration` would be, with the build's three labels plus
//!    `machineconfiguration.openshift.io/pre-built-image=true`, the push-secret annotation,
//!    `foregroundDeletion`, a controller ownerReference, `spec.renderedImagePushSpec` = the
//!    **MOSC's** push spec (e.g. `<repo>:latest`), and a status written separately: `buildStart`
//!    now, `buildEnd` a second later, `digestedImagePushSpec` the pre-built image, Succeeded=True
//!    and Prepared/Building/Failed/Interrupted=False, all with reason `PreBuiltImageSeeded` (no
//!    `builder`);
//! 3. the MOSC names it in its current-build annotation, and its status points at the image
//!    (`currentImagePullSpec`, `observedGeneration`, `machineOSBuild`) with a condition
//!    `Seeded=True` (reason `PreBuiltImageSeeded`);
//! 4. on a later pass the pre-built annotation is removed.
//!
//! Deleting the synthetic MOSB deletes its image by tag like any other: whatever the MOSC's tag
//! points to. Not modelled: the MachineConfig `10-prebuiltimage-osimageurl-<pool>` the operator
//! keeps while the MOSC exists (the harness has no MachineConfigs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::super::jobs::MCO_NAMESPACE;
use super::super::reconcile::is_conflict;
use super::start::controller_reference;
use super::{BuildController, PUSH_SECRET_ANNOTATION, World, mosb_name};
use crate::Result;
use crate::mco::{
    self, CURRENT_MOSB, GROUP, LABEL_MOSC, LABEL_POOL, LABEL_PRE_BUILT, LABEL_RENDERED,
    PRE_BUILT_IMAGE, str_at,
};

/// Reason of the synthetic build's conditions and of the MOSC's `Seeded` condition.
const REASON: &str = "PreBuiltImageSeeded";

/// The MOSC's pre-built image annotation, if set and not empty (`getPreBuiltImage`).
pub(super) fn image(mosc: &DynamicObject) -> Option<&str> {
    mosc.metadata
        .annotations
        .as_ref()?
        .get(PRE_BUILT_IMAGE)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

impl BuildController {
    /// Seeds `mosc` with its pre-built image (steps 1-3 above).
    pub(super) async fn seed_pre_built(
        &mut self,
        mosc: &DynamicObject,
        pool: &DynamicObject,
        world: &World,
    ) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let image = image(mosc).unwrap_or_default().to_owned();
        let secret =
            str_at(&mosc.data, &["spec", "renderedImagePushSecret", "name"]).ok_or_else(|| {
                format!("MachineOSConfig {mosc_name} has no rendered image push secret")
            })?;
        let secrets: Api<Secret> = Api::namespaced(self.ctx.client.clone(), MCO_NAMESPACE);
        if secrets.get_opt(secret).await?.is_none() {
            return Err(format!(
                "could not ensure push secret {secret} exists: required secret {secret} not found \
                 in {MCO_NAMESPACE} namespace"
            )
            .into());
        }
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let rendered = mco::pool_target_config(pool);
        let name = mosb_name(&mosc_name, mosc, &rendered);
        let push_spec = str_at(&mosc.data, &["spec", "renderedImagePushSpec"]).unwrap_or_default();
        let api = mco::mosbs(&self.ctx.client);
        if world.mosb(&name).is_none() {
            let mut mosb = DynamicObject::new(&name, &mco::mosb_resource()).data(json!({
                "spec": {
                    "renderedImagePushSpec": push_spec,
                    "machineConfig": {"name": rendered},
                    "machineOSConfig": {"name": mosc_name},
                }
            }));
            mosb.metadata.labels = Some(BTreeMap::from([
                (LABEL_MOSC.to_owned(), mosc_name.clone()),
                (LABEL_POOL.to_owned(), pool_name),
                (LABEL_RENDERED.to_owned(), rendered.clone()),
                (LABEL_PRE_BUILT.to_owned(), "true".to_owned()),
            ]));
            mosb.metadata.annotations = Some(BTreeMap::from([(
                PUSH_SECRET_ANNOTATION.to_owned(),
                secret.to_owned(),
            )]));
            mosb.metadata.finalizers = Some(vec!["foregroundDeletion".to_owned()]);
            mosb.metadata.owner_references = Some(vec![controller_reference(mosc)]);
            match self
                .ctx
                .write(
                    &format!("creating synthetic MachineOSBuild {name}"),
                    api.create(&PostParams::default(), &mosb),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if is_conflict(&e) => {}
                Err(e) => return Err(e.into()),
            }
            tracing::info!(
                "sim build: created synthetic MachineOSBuild {name} for pre-built image {image}"
            );
        } else {
            // Created by the normal path in between: MCO labels it as synthetic.
            let patch = json!({"metadata": {"labels": {LABEL_PRE_BUILT: "true"}}});
            self.ctx
                .write(
                    &format!("labelling MachineOSBuild {name} as synthetic"),
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await?;
        }
        let start = Timestamp::from_second(Timestamp::now().as_second())?;
        let end = start + SignedDuration::from_secs(1);
        let condition = |type_: &str, on: bool, message: String| {
            json!({"type": type_, "status": if on { "True" } else { "False" },
                   "lastTransitionTime": start.to_string(), "reason": REASON, "message": message})
        };
        let skipped = || "Skipped: using pre-built image".to_owned();
        let status = json!({"status": {
            "buildStart": start.to_string(),
            "buildEnd": end.to_string(),
            "digestedImagePushSpec": image,
            "conditions": [
                condition("Succeeded", true, format!("Pre-built image {image:?} successfully seeded")),
                condition("Prepared", false, skipped()),
                condition("Building", false, skipped()),
                condition("Failed", false, skipped()),
                condition("Interrupted", false, skipped()),
            ],
        }});
        self.ctx
            .write(
                &format!("status of synthetic MachineOSBuild {name}"),
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)),
            )
            .await?;
        self.seed_mosc(mosc, &name, &image).await
    }

    /// `updateMachineOSConfigForSeeding`: the current-build annotation, then the status.
    async fn seed_mosc(&self, mosc: &DynamicObject, mosb: &str, image: &str) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let api = mco::moscs(&self.ctx.client);
        let patch = json!({"metadata": {"annotations": {CURRENT_MOSB: mosb}}});
        let updated = self
            .ctx
            .write(
                &format!("naming the synthetic build of MachineOSConfig {mosc_name}"),
                api.patch(&mosc_name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await?;
        let mut conditions: Vec<Value> = updated
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("Seeded"));
        conditions.push(json!({
            "type": "Seeded", "status": "True", "lastTransitionTime": super::super::reconcile::now_rfc3339(),
            "reason": REASON, "message": format!("MachineOSConfig seeded with pre-built image {image:?}"),
        }));
        let status = json!({"status": {
            "currentImagePullSpec": image,
            "observedGeneration": updated.metadata.generation,
            "machineOSBuild": {"group": GROUP, "resource": "machineosbuilds", "name": mosb},
            "conditions": conditions,
        }});
        self.ctx
            .write(
                &format!("seeding MachineOSConfig {mosc_name} with {image}"),
                api.patch_status(&mosc_name, &PatchParams::default(), &Patch::Merge(&status)),
            )
            .await?;
        tracing::info!(
            "sim build: seeded MachineOSConfig {mosc_name} with pre-built image {image}"
        );
        Ok(())
    }

    /// Step 4: `needsPreBuiltImageAnnotationCleanup` (the MOSC names a build and has an image).
    pub(super) async fn drop_pre_built_annotation(&self, mosc: &DynamicObject) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let patch = json!({"metadata": {"annotations": {PRE_BUILT_IMAGE: null}}});
        self.ctx
            .write(
                &format!("removing the pre-built image annotation of {mosc_name}"),
                mco::moscs(&self.ctx.client).patch(
                    &mosc_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ),
            )
            .await?;
        tracing::info!("sim build: removed the pre-built image annotation of {mosc_name}");
        Ok(())
    }
}
