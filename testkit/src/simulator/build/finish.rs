//! Builds that end, are reused or are rebuilt: a running build finishing (pushed and
//! Succeeded, or Failed); `reuseExistingMachineOSBuildIfPossible` for a build that exists for
//! the inputs; the rebuild annotation (`rebuildMachineOSConfig`).

use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::super::jobs;
use super::super::reconcile::now_rfc3339;
use super::{BuildController, World, conditions, current_build_annotation};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::mco::{self, str_at};
use jobs::MCO_NAMESPACE;

impl BuildController {
    /// Once the build has run for its delay, and in a later second than it started (buildEnd
    /// must be strictly after buildStart): push the image and mark the MOSB Succeeded, or Failed.
    pub(super) async fn finish_build(
        &mut self,
        mosc: &DynamicObject,
        mosb: &DynamicObject,
    ) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        let uid = mosb.metadata.uid.clone().unwrap_or_default();
        let Some(started_at) = str_at(&mosb.data, &["status", "buildStart"]) else {
            return Ok(());
        };
        let started_second = started_at
            .parse::<Timestamp>()
            .map(|t| t.as_second())
            .map_err(|e| format!("MachineOSBuild {name} buildStart {started_at:?}: {e}"))?;
        let started = *self
            .builds
            .entry(uid.clone())
            .or_insert_with(std::time::Instant::now);
        if started.elapsed() < self.ctx.build_delay()
            || Timestamp::now().as_second() <= started_second
        {
            return Ok(());
        }
        let push_spec = str_at(&mosb.data, &["spec", "renderedImagePushSpec"])
            .ok_or_else(|| format!("MachineOSBuild {name} has no spec.renderedImagePushSpec"))?;
        let target = ImageRef::parse(push_spec)?;
        let api = mco::mosbs(&self.ctx.client);
        let now = now_rfc3339();
        let builder = json!({"imageBuilderType": "Job", "job": {
            "group": "batch", "resource": "jobs", "namespace": MCO_NAMESPACE, "name": jobs::job_name(&name),
        }});
        let fail = if self.ctx.knobs(|k| k.fail_builds) {
            Some("the build was set to fail".to_owned())
        } else if !self.ctx.serves(&target.host) {
            Some(format!("{} is not the harness registry", target.host))
        } else {
            None
        };
        if let Some(why) = fail {
            tracing::warn!("sim build: MachineOSBuild {name} failed: {why}");
            let status = json!({"status": {
                "conditions": conditions(&now, &[("Prepared", false, "Prepared"), ("Building", false, "Failed"),
                                                  ("Succeeded", false, "Failed"), ("Failed", true, "BuildFailed"),
                                                  ("Interrupted", false, "Failed")]),
                "buildEnd": now,
                "builder": builder,
            }});
            self.ctx
                .write(
                    &format!("failing MachineOSBuild {name}"),
                    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)),
                )
                .await?;
            self.builds.remove(&uid);
            return Ok(());
        }
        let tag = target.tag.clone().unwrap_or_else(|| name.clone());
        let digest = self.ctx.registry.push_image(&target.repo, &tag).await?;
        let digested = target.with_digest(&digest);
        jobs::write_digest_configmap(&self.ctx, mosb, &digest).await?;
        let status = json!({"status": {
            "conditions": conditions(&now, &[("Prepared", false, "Prepared"), ("Building", false, "Building"),
                                              ("Succeeded", true, "Ready"), ("Failed", false, "Ready"),
                                              ("Interrupted", false, "Ready")]),
            "digestedImagePushSpec": digested,
            "buildEnd": now,
            "builder": builder,
        }});
        let updated = self
            .ctx
            .write(
                &format!("marking MachineOSBuild {name} Succeeded"),
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)),
            )
            .await?;
        self.builds.remove(&uid);
        tracing::info!("sim build: MachineOSBuild {name} succeeded; pushed {digested}");
        // MCO cleans up the Job and the ephemeral objects of a succeeded build (a failed one's
        // stay for inspection); the digest ConfigMap stays.
        jobs::clean_build_objects(&self.ctx, mosb).await?;
        self.update_mosc_status(mosc, &updated).await
    }

    /// A succeeded build for the MOSC's inputs. If the MOSC names it, only make sure its status
    /// points at the image (the success path, retried). Otherwise it is reused
    /// (`reuseExistingMachineOSBuildIfPossible`, whoever controls it: a config change rolled
    /// back, a MOSC recreated with the same name): if its image tag is gone the MOSB is deleted
    /// (the next pass builds it again), else the other unsucceeded builds are deleted and the
    /// MOSC is pointed at it.
    pub(super) async fn reuse(
        &self,
        mosc: &DynamicObject,
        mosb: &DynamicObject,
        world: &World,
    ) -> Result<()> {
        let name = mosb.metadata.name.as_deref().unwrap_or_default();
        if current_build_annotation(mosc) == Some(name) {
            return self.update_mosc_status(mosc, mosb).await;
        }
        let tagged = str_at(&mosb.data, &["spec", "renderedImagePushSpec"]).unwrap_or_default();
        if !self.image_exists(tagged).await? {
            tracing::info!(
                "sim build: existing MachineOSBuild {name}'s image {tagged} no longer exists; \
                 deleting it to build it again"
            );
            return self.delete_mosb(name, "its image is gone").await;
        }
        tracing::info!(
            "sim build: reusing MachineOSBuild {name} and its image for MachineOSConfig {}",
            mosc.metadata.name.as_deref().unwrap_or_default()
        );
        self.delete_other_builds(mosc, name, world).await?;
        self.update_mosc_status(mosc, mosb).await
    }

    /// Whether `tagged` (`<repo>:<tag>`) resolves in the registry (the image inspection by tag,
    /// so a deleted tag counts as a missing image).
    async fn image_exists(&self, tagged: &str) -> Result<bool> {
        let r = ImageRef::parse(tagged)?;
        if !self.ctx.serves(&r.host) {
            return Ok(false);
        }
        let reference = r.reference().unwrap_or("latest").to_owned();
        Ok(self
            .ctx
            .registry
            .resolve(&r.repo, &reference)
            .await?
            .is_some())
    }

    /// The rebuild annotation on a MOSC that names a current build: deletes it (and a build of
    /// the same inputs) through `deleteMachineOSBuild` (image first, under the in-use check; a
    /// refused deletion is retried on the next pass). `true` while any is still there; then
    /// the caller creates the new build (which removes the annotation when it starts). A MOSC
    /// without a current build has nothing to rebuild (MCO skips it).
    pub(super) async fn rebuild_pending(
        &self,
        mosc: &DynamicObject,
        existing: Option<&DynamicObject>,
        world: &World,
    ) -> Result<bool> {
        let Some(current) = current_build_annotation(mosc) else {
            return Ok(false);
        };
        let ours = |b: &DynamicObject| {
            b.metadata
                .uid
                .as_ref()
                .is_some_and(|u| self.rebuilt.contains(u))
        };
        let mut victims: Vec<&DynamicObject> = world.mosb(current).into_iter().collect();
        victims.extend(existing.filter(|e| e.metadata.name.as_deref() != Some(current)));
        let mut pending = false;
        for victim in victims.into_iter().filter(|v| !ours(v)) {
            pending = true;
            if victim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            tracing::info!(
                "sim build: rebuild requested for {}; deleting {} and its image",
                mosc.metadata.name.as_deref().unwrap_or_default(),
                victim.metadata.name.as_deref().unwrap_or_default()
            );
            self.delete_machine_os_build(victim, world).await?;
        }
        Ok(pending)
    }
}
