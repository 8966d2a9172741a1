//! The build controller (machine-os-builder): one MachineOSBuild and one pushed image per
//! (MOSC, rendered config), shaped as MCO 4.20 writes them, with the build's Job, ConfigMaps
//! and Secrets ([`super::jobs`]); MOSC status; the rebuild annotation; reuse of a build when a
//! config is rolled back; and the two delete handlers ([`deletes`]), which are where the
//! releases differ.

mod deletes;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::jobs::{self, MCO_NAMESPACE};
use super::{Ctx, Reconciler, is_conflict, now_rfc3339};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::mco::{
    self, CURRENT_MOSB, GROUP, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED, REBUILD, condition_true,
    str_at,
};
use deletes::Queued;

/// MOSB annotation naming the MOSC's push secret (4.20 writes it on every build).
pub const PUSH_SECRET_ANNOTATION: &str =
    "machineconfiguration.openshift.io/rendered-image-push-secret";

pub(super) struct BuildController {
    ctx: Ctx,
    /// MOSC name -> the MOSC as last seen.
    seen_moscs: HashMap<String, DynamicObject>,
    /// MOSB name -> the MOSB as last seen.
    seen_mosbs: HashMap<String, DynamicObject>,
    /// Delete events not handled yet.
    queue: Vec<Queued>,
    /// When each running build (MOSB uid) started, by this process's clock.
    builds: HashMap<String, Instant>,
}

/// One pass's view of the cluster (MCO's informer caches).
struct World {
    moscs: Vec<DynamicObject>,
    mosbs: Vec<DynamicObject>,
    pools: Vec<DynamicObject>,
    nodes: Vec<Node>,
}

impl BuildController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            seen_moscs: HashMap::new(),
            seen_mosbs: HashMap::new(),
            queue: Vec::new(),
            builds: HashMap::new(),
        }
    }

    /// Builds for one MOSC: create its MOSB, finish the build, point the MOSC at the result.
    async fn sync_mosc(&mut self, mosc: &DynamicObject, world: &World) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
        let uid = mosc.metadata.uid.clone().unwrap_or_default();
        let Some(pool_name) = str_at(&mosc.data, &["spec", "machineConfigPool", "name"]) else {
            return Ok(());
        };
        let Some(pool) = world
            .pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool_name))
        else {
            return Ok(());
        };
        let rendered = mco::pool_target_config(pool);
        let mosb_name = mosb_name(&name, mosc, &rendered);
        let existing = world
            .mosbs
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(mosb_name.as_str()));
        if let Some(other) = existing.filter(|b| !controlled_by(b, &uid)) {
            // A build of an earlier MOSC with the same name, not cleaned up yet: wait for it.
            tracing::debug!(
                "sim build: {mosb_name} belongs to an earlier MachineOSConfig {name} ({:?}); waiting",
                other.metadata.uid
            );
            return Ok(());
        }

        let rebuild = mosc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(REBUILD));
        if rebuild {
            return self
                .rebuild(mosc, pool_name, &rendered, &mosb_name, existing, world)
                .await;
        }
        match existing {
            None => {
                self.create_mosb(mosc, pool_name, &rendered, &mosb_name)
                    .await
            }
            Some(mosb) if mosb.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(mosb) if condition_true(mosb, "Succeeded") => self.reuse(mosc, mosb).await,
            Some(mosb) if condition_true(mosb, "Failed") || condition_true(mosb, "Interrupted") => {
                Ok(())
            }
            Some(mosb) => self.finish_build(mosc, mosb).await,
        }
    }

    /// A succeeded build for the pool's current config: point the MOSC at it. When it is not
    /// the MOSC's image yet (a config change rolled back to this build), 4.20 first checks the
    /// image still exists; if it is gone the build is deleted and the next pass rebuilds.
    async fn reuse(&self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        let image = str_at(&mosb.data, &["status", "digestedImagePushSpec"]);
        let current = str_at(&mosc.data, &["status", "currentImagePullSpec"]);
        if let Some(image) = image.filter(|i| Some(*i) != current) {
            let r = ImageRef::parse(image)?;
            let digest = r.digest.clone().unwrap_or_default();
            // `manifest_status` is `None` while the manifest is there.
            if let Some(gone) = self.ctx.registry.manifest_status(&r.repo, &digest).await? {
                let name = mosb.metadata.name.as_deref().unwrap_or_default();
                tracing::info!(
                    "sim build: reused build {name}'s image {image} is gone ({gone}); rebuilding"
                );
                return self.delete_mosb(name, "its image is gone").await;
            }
            tracing::info!(
                "sim build: reusing MachineOSBuild {} for a rolled-back config",
                mosb.metadata.name.as_deref().unwrap_or_default()
            );
        }
        self.point_mosc_at(mosc, mosb).await
    }

    /// The rebuild annotation: delete the current build (its image first, with the in-use
    /// check), then create a new one and drop the annotation. A refused deletion is retried.
    async fn rebuild(
        &mut self,
        mosc: &DynamicObject,
        pool: &str,
        rendered: &str,
        mosb_name: &str,
        existing: Option<&DynamicObject>,
        world: &World,
    ) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        match existing {
            Some(mosb) if mosb.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(mosb) => {
                tracing::info!(
                    "sim build: rebuild requested for {mosc_name}; deleting {mosb_name} and its image"
                );
                self.delete_machine_os_build(mosb, world).await
            }
            None => {
                self.create_mosb(mosc, pool, rendered, mosb_name).await?;
                let patch = json!({"metadata": {"annotations": {REBUILD: null}}});
                self.ctx
                    .write(
                        &format!("removing the rebuild annotation of {mosc_name}"),
                        mco::moscs(&self.ctx.client).patch(
                            &mosc_name,
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        ),
                    )
                    .await?;
                Ok(())
            }
        }
    }

    /// Creates the MOSB as 4.20 does: foregroundDeletion finalizer, push-secret annotation,
    /// labels, controller ownerReference, then `status.buildStart` and the first conditions.
    async fn create_mosb(
        &mut self,
        mosc: &DynamicObject,
        pool: &str,
        rendered: &str,
        mosb_name: &str,
    ) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let push_spec =
            str_at(&mosc.data, &["spec", "renderedImagePushSpec"]).ok_or_else(|| {
                format!("MachineOSConfig {mosc_name} has no spec.renderedImagePushSpec")
            })?;
        let push_secret = str_at(&mosc.data, &["spec", "renderedImagePushSecret", "name"])
            .unwrap_or_default()
            .to_owned();
        let repo = ImageRef::parse(push_spec)?;
        let mut mosb = DynamicObject::new(mosb_name, &mco::mosb_resource()).data(json!({
            "spec": {
                "machineConfig": {"name": rendered},
                "machineOSConfig": {"name": mosc_name},
                "renderedImagePushSpec": repo.with_tag(mosb_name),
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
        mosb.metadata.owner_references = Some(vec![OwnerReference {
            api_version: format!("{GROUP}/v1"),
            kind: "MachineOSConfig".to_owned(),
            name: mosc_name.clone(),
            uid: mosc.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
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
        self.start_build(mosc, &created).await?;
        tracing::info!(
            "sim build: created MachineOSBuild {mosb_name} for {mosc_name} (rendered config {rendered}); building"
        );
        Ok(())
    }

    /// Starts a build: its Job, ConfigMaps and Secrets ([`jobs::start_build_objects`]), then
    /// `buildStart` and the conditions of a running build.
    async fn start_build(&mut self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        jobs::start_build_objects(&self.ctx, mosc, mosb).await?;
        let name = mosb.metadata.name.clone().unwrap_or_default();
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
        Ok(())
    }

    /// Once the build has run for its delay, and in a later second than it started (buildEnd
    /// must be strictly after buildStart): push the image and mark the MOSB Succeeded, or Failed.
    async fn finish_build(&mut self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        let uid = mosb.metadata.uid.clone().unwrap_or_default();
        let Some(started_at) = str_at(&mosb.data, &["status", "buildStart"]) else {
            // Created, but the status write did not happen (a restart in between): start now.
            return self.start_build(mosc, mosb).await;
        };
        let started_second = started_at
            .parse::<Timestamp>()
            .map(|t| t.as_second())
            .map_err(|e| format!("MachineOSBuild {name} buildStart {started_at:?}: {e}"))?;
        let started = *self.builds.entry(uid.clone()).or_insert_with(Instant::now);
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
        } else if target.host != self.ctx.registry.host() {
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
        self.point_mosc_at(mosc, &updated).await
    }

    /// Sets the MOSC's `status.currentImagePullSpec` and its current-machine-os-build annotation
    /// to a succeeded build, if not already so (4.20 does not write `status.machineOSBuild`).
    async fn point_mosc_at(&self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let mosb_name = mosb.metadata.name.clone().unwrap_or_default();
        let Some(image) = str_at(&mosb.data, &["status", "digestedImagePushSpec"]) else {
            return Ok(());
        };
        let api = mco::moscs(&self.ctx.client);
        if str_at(&mosc.data, &["status", "currentImagePullSpec"]) != Some(image) {
            let status = json!({"status": {
                "currentImagePullSpec": image,
                "observedGeneration": mosc.metadata.generation,
            }});
            self.ctx
                .write(
                    &format!("pointing MachineOSConfig {mosc_name} at {image}"),
                    api.patch_status(&mosc_name, &PatchParams::default(), &Patch::Merge(&status)),
                )
                .await?;
            tracing::info!(
                "sim build: MachineOSConfig {mosc_name} now points at {image} ({mosb_name})"
            );
        }
        let annotated = mosc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CURRENT_MOSB))
            .is_some_and(|v| *v == mosb_name);
        if !annotated {
            let patch = json!({"metadata": {"annotations": {CURRENT_MOSB: mosb_name}}});
            self.ctx
                .write(
                    &format!("annotating MachineOSConfig {mosc_name}"),
                    api.patch(&mosc_name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await?;
        }
        Ok(())
    }
}

impl Reconciler for BuildController {
    async fn sync(&mut self) -> Result<()> {
        let world = World {
            moscs: mco::list_all(&mco::moscs(&self.ctx.client)).await?,
            mosbs: mco::list_all(&mco::mosbs(&self.ctx.client)).await?,
            pools: mco::list_all(&mco::mcps(&self.ctx.client)).await?,
            nodes: mco::list_all(&mco::nodes(&self.ctx.client)).await?,
        };
        self.queue_deletions(&world);
        self.handle_due_deletions(&world).await;
        let pending = self.pending_cleanups();
        if let Ok(mut k) = self.ctx.knobs.lock() {
            k.pending_cleanups = pending;
        }
        // Like MCO 4.20, a MOSC with a deletionTimestamp is still built for and reported on.
        for mosc in &world.moscs {
            self.sync_mosc(mosc, &world).await?;
        }
        Ok(())
    }
}

fn label(obj: &DynamicObject, key: &str) -> Option<String> {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
}

/// Whether `obj`'s controller ownerReference names `uid` (4.20's cleanup test since the
/// same-name recreate fix).
fn controlled_by(obj: &DynamicObject, uid: &str) -> bool {
    obj.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// `<mosc>-<32 hex>`: the hash covers the build inputs (the MOSC spec and the rendered config),
/// so the same inputs give the same name, as MCO's md5 of them does.
pub(super) fn mosb_name(mosc_name: &str, mosc: &DynamicObject, rendered: &str) -> String {
    let spec = mosc.data.get("spec").cloned().unwrap_or(Value::Null);
    let mut hasher = Sha256::new();
    hasher.update(spec.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(rendered.as_bytes());
    let hash: String = hasher
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{mosc_name}-{hash}")
}

/// MOSB conditions (type, status, reason), all with the same transition time and the reason
/// and message a real API server requires.
fn conditions(now: &str, states: &[(&str, bool, &str)]) -> Vec<Value> {
    states
        .iter()
        .map(|(type_, on, reason)| {
            json!({
                "type": type_,
                "status": if *on { "True" } else { "False" },
                "reason": reason,
                "message": if *on { format!("Build {type_}") } else { String::new() },
                "lastTransitionTime": now,
            })
        })
        .collect()
}
