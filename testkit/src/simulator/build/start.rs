//! Creating and starting builds: `createNewMachineOSBuildOrReuseExisting` (the MOSB as MCO
//! creates it), `startBuild` (the other unsucceeded builds deleted first, then the Job, then
//! the MOSC told), and `updateMachineOSConfigStatus` (the current-build annotation, and once
//! the build has an image the MOSC's status).

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::super::jobs;
use super::super::reconcile::{is_conflict, now_rfc3339};
use super::{
    BuildController, PUSH_SECRET_ANNOTATION, World, conditions, current_build_annotation, label,
};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::mco::{
    self, CURRENT_MOSB, GROUP, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED, REBUILD, condition_true,
    str_at,
};

impl BuildController {
    /// Creates the MOSB as 4.20 does (foregroundDeletion finalizer, push-secret annotation,
    /// labels, controller ownerReference), then starts it ([`Self::start_build`]). A MOSB
    /// created for the rebuild annotation is remembered as the new build (`rebuild`), so it is
    /// not deleted in turn while the annotation stays.
    pub(super) async fn create_mosb(
        &mut self,
        mosc: &DynamicObject,
        pool: &str,
        rendered: &str,
        mosb_name: &str,
        rebuild: bool,
        world: &World,
    ) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let push_spec =
            str_at(&mosc.data, &["spec", "renderedImagePushSpec"]).ok_or_else(|| {
                format!("MachineOSConfig {mosc_name} has no spec.renderedImagePushSpec")
            })?;
        let repo = ImageRef::parse(push_spec)?;
        let mosb = new_mosb(mosc, pool, rendered, mosb_name, &repo.with_tag(mosb_name));
        let api = mco::mosbs(&self.ctx.client);
        let created = match self
            .ctx
            .write(
                &format!("creating MachineOSBuild {mosb_name}"),
                api.create(&PostParams::default(), &mosb),
            )
            .await
        {
            Ok(created) => created,
            Err(e) if is_conflict(&e) => return Ok(()),
            Err(e) => return Err(format!("creating MachineOSBuild {mosb_name}: {e}").into()),
        };
        tracing::info!(
            "sim build: created MachineOSBuild {mosb_name} for {mosc_name} (rendered config {rendered})"
        );
        if let Some(uid) = created.metadata.uid.clone().filter(|_| rebuild) {
            self.rebuilt.insert(uid);
        }
        self.start_build(mosc, &created, world).await
    }

    /// `startBuild`: deletes every other build of the MOSC that has not succeeded (an error
    /// aborts the start: no Job, retried on the next pass), creates the build's Job, ConfigMaps
    /// and Secrets ([`jobs::start_build_objects`]; a Job that cannot be created aborts it too,
    /// and the MOSB stays unstarted), writes `buildStart` and the conditions of a running
    /// build, and names the build in the MOSC's current-build annotation.
    pub(super) async fn start_build(
        &mut self,
        mosc: &DynamicObject,
        mosb: &DynamicObject,
        world: &World,
    ) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        self.delete_other_builds(mosc, &name, world)
            .await
            .map_err(|e| {
                format!("could not start MachineOSBuild {name}: could not delete other non-terminal MachineOSBuilds: {e}")
            })?;
        jobs::start_build_objects(&self.ctx, mosc, mosb)
            .await
            .map_err(|e| {
                format!("imagebuilder could not start build for MachineOSBuild {name}: {e}")
            })?;
        let now = now_rfc3339();
        let status = json!({"status": {
            "conditions": conditions(&now, &[("Prepared", true, "Prepared"), ("Building", true, "Building"),
                                              ("Succeeded", false, "Building"), ("Failed", false, "Building"),
                                              ("Interrupted", false, "Building")]),
            "buildStart": now,
        }});
        self.ctx
            .write(
                &format!("starting the build of {name}"),
                mco::mosbs(&self.ctx.client).patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                ),
            )
            .await?;
        if let Some(uid) = mosb.metadata.uid.clone() {
            self.builds.insert(uid, Instant::now());
        }
        tracing::info!("sim build: started MachineOSBuild {name}");
        self.update_mosc_status(mosc, mosb).await
    }

    /// A build that is not terminal: start it if it never started, take it over if the MOSC
    /// does not name it yet (a transient build reused), finish it once it has run long enough.
    pub(super) async fn progress(
        &mut self,
        mosc: &DynamicObject,
        mosb: &DynamicObject,
        world: &World,
    ) -> Result<()> {
        if str_at(&mosb.data, &["status", "buildStart"]).is_none() {
            // Created but never started (the start failed, or a restart came in between).
            return self.start_build(mosc, mosb, world).await;
        }
        let name = mosb.metadata.name.as_deref().unwrap_or_default();
        if current_build_annotation(mosc) != Some(name) {
            tracing::info!(
                "sim build: reusing MachineOSBuild {name}, still building, for MachineOSConfig {}",
                mosc.metadata.name.as_deref().unwrap_or_default()
            );
            self.delete_other_builds(mosc, name, world).await?;
            self.update_mosc_status(mosc, mosb).await?;
        }
        self.finish_build(mosc, mosb).await
    }

    /// `deleteOtherBuildsForMachineOSConfig`: every MOSB with the MOSC's two labels other than
    /// `keep` that has not succeeded (pending, running, failed, interrupted; whoever controls
    /// it) goes through `deleteMachineOSBuild`: its image first (under the in-use check), the
    /// digest ConfigMap, then the MOSB. The first error stops it.
    pub(super) async fn delete_other_builds(
        &self,
        mosc: &DynamicObject,
        keep: &str,
        world: &World,
    ) -> Result<()> {
        let name = mosc.metadata.name.as_deref().unwrap_or_default();
        let pool = str_at(&mosc.data, &["spec", "machineConfigPool", "name"]).unwrap_or_default();
        let others = world.mosbs.iter().filter(|b| {
            label(b, LABEL_MOSC).as_deref() == Some(name)
                && label(b, LABEL_POOL).as_deref() == Some(pool)
                && b.metadata.name.as_deref() != Some(keep)
                && !condition_true(b, "Succeeded")
        });
        for other in others {
            tracing::info!(
                "sim build: found running MachineOSBuild {} for MachineOSConfig {name}, deleting...",
                other.metadata.name.as_deref().unwrap_or_default()
            );
            self.delete_machine_os_build(other, world).await?;
        }
        Ok(())
    }

    /// `updateMachineOSConfigStatus`: names `mosb` in the MOSC's current-build annotation (and
    /// removes the rebuild annotation) if it does not yet; 4.21 on, also bumps
    /// `status.observedGeneration` then. Once `mosb` has an image, points
    /// `status.currentImagePullSpec` at it (4.21 on: and `status.machineOSBuild`).
    pub(super) async fn update_mosc_status(
        &self,
        mosc: &DynamicObject,
        mosb: &DynamicObject,
    ) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let mosb_name = mosb.metadata.name.clone().unwrap_or_default();
        let api = mco::moscs(&self.ctx.client);
        let rebuild = mosc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(REBUILD));
        let release = self.ctx.release();
        let observed = mosc
            .data
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        if rebuild || current_build_annotation(mosc) != Some(mosb_name.as_str()) {
            let mut annotations = serde_json::Map::new();
            annotations.insert(CURRENT_MOSB.to_owned(), json!(mosb_name));
            if rebuild {
                annotations.insert(REBUILD.to_owned(), Value::Null);
            }
            let patch = json!({"metadata": {"annotations": annotations}});
            self.ctx
                .write(
                    &format!("naming {mosb_name} the current build of MachineOSConfig {mosc_name}"),
                    api.patch(&mosc_name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await?;
            tracing::info!(
                "sim build: set current build on MachineOSConfig {mosc_name} to MachineOSBuild {mosb_name}"
            );
            if release.writes_mosc_build_reference() && observed != mosc.metadata.generation {
                let status = json!({"status": {"observedGeneration": mosc.metadata.generation}});
                self.ctx
                    .write(
                        &format!("observedGeneration of MachineOSConfig {mosc_name}"),
                        api.patch_status(
                            &mosc_name,
                            &PatchParams::default(),
                            &Patch::Merge(&status),
                        ),
                    )
                    .await?;
            }
        }
        let Some(image) = str_at(&mosb.data, &["status", "digestedImagePushSpec"]) else {
            return Ok(());
        };
        let referenced = mosc
            .data
            .pointer("/status/machineOSBuild/name")
            .and_then(Value::as_str)
            == Some(mosb_name.as_str());
        let current = str_at(&mosc.data, &["status", "currentImagePullSpec"]) == Some(image);
        if current && (referenced || !release.writes_mosc_build_reference()) {
            return Ok(());
        }
        let mut status = json!({
            "currentImagePullSpec": image,
            "observedGeneration": mosc.metadata.generation,
        });
        if release.writes_mosc_build_reference() {
            status["machineOSBuild"] =
                json!({"group": GROUP, "resource": "machineosbuilds", "name": mosb_name});
        }
        self.ctx
            .write(
                &format!("pointing MachineOSConfig {mosc_name} at {image}"),
                api.patch_status(
                    &mosc_name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "status": status })),
                ),
            )
            .await?;
        tracing::info!(
            "sim build: MachineOSConfig {mosc_name} now points at {image} ({mosb_name})"
        );
        Ok(())
    }
}

/// The MOSB `createNewMachineOSBuildOrReuseExisting` creates, pushing to `push_spec`.
fn new_mosb(
    mosc: &DynamicObject,
    pool: &str,
    rendered: &str,
    mosb_name: &str,
    push_spec: &str,
) -> DynamicObject {
    let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
    let push_secret = str_at(&mosc.data, &["spec", "renderedImagePushSecret", "name"])
        .unwrap_or_default()
        .to_owned();
    let mut mosb = DynamicObject::new(mosb_name, &mco::mosb_resource()).data(json!({
        "spec": {
            "machineConfig": {"name": rendered},
            "machineOSConfig": {"name": mosc_name},
            "renderedImagePushSpec": push_spec,
        }
    }));
    mosb.metadata.labels = Some(BTreeMap::from([
        (LABEL_MOSC.to_owned(), mosc_name.clone()),
        (LABEL_POOL.to_owned(), pool.to_owned()),
        (LABEL_RENDERED.to_owned(), rendered.to_owned()),
    ]));
    mosb.metadata.annotations = Some(BTreeMap::from([(
        PUSH_SECRET_ANNOTATION.to_owned(),
        push_secret,
    )]));
    mosb.metadata.finalizers = Some(vec!["foregroundDeletion".to_owned()]);
    mosb.metadata.owner_references = Some(vec![controller_reference(mosc)]);
    mosb
}

/// `metav1.NewControllerRef(mosc, MachineOSConfig)`.
pub(super) fn controller_reference(mosc: &DynamicObject) -> OwnerReference {
    OwnerReference {
        api_version: format!("{GROUP}/v1"),
        kind: "MachineOSConfig".to_owned(),
        name: mosc.metadata.name.clone().unwrap_or_default(),
        uid: mosc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
