//! The build controller (machine-os-builder): one MachineOSBuild and one pushed image per
//! (MOSC, rendered config), shaped as MCO 4.20 writes them; MOSC status; the image cleanup when a
//! MOSB or MOSC goes away; the rebuild annotation; reuse of a build when a config is rolled back.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::super::Result;
use super::super::image_ref::ImageRef;
use super::super::mco::{
    self, CURRENT_IMAGE, CURRENT_MOSB, DESIRED_IMAGE, GROUP, LABEL_MOSC, LABEL_POOL,
    LABEL_RENDERED, REBUILD, condition_true, node_annotation, str_at,
};
use super::nodes::pool_members;
use super::{Ctx, Reconciler, is_conflict, is_not_found, now_rfc3339};

/// MOSB annotation naming the MOSC's push secret (4.20 writes it on every build).
pub const PUSH_SECRET_ANNOTATION: &str =
    "machineconfiguration.openshift.io/rendered-image-push-secret";
/// Namespace of MCO's build Jobs.
const MCO_NAMESPACE: &str = "openshift-machine-config-operator";

/// A MOSB as last seen, so its image can be cleaned up once it is gone.
struct SeenMosb {
    uid: String,
    image: Option<String>,
    mosc: Option<String>,
    pool: Option<String>,
}

pub(super) struct BuildController {
    ctx: Ctx,
    /// MOSC name -> uid, as of the previous pass.
    seen_moscs: HashMap<String, String>,
    /// MOSB name -> last seen state.
    seen_mosbs: HashMap<String, SeenMosb>,
    /// Deleted MOSCs (name -> uid) whose builds still have to be cleaned up.
    pending_cleanup: BTreeMap<String, String>,
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
            pending_cleanup: BTreeMap::new(),
            builds: HashMap::new(),
        }
    }

    /// The informer "delete" events: MOSCs and MOSBs seen before that are gone now.
    async fn handle_deletions(&mut self, world: &World) -> Result<()> {
        let live_moscs: HashMap<String, String> = world.moscs.iter().filter_map(name_uid).collect();
        for (name, uid) in &self.seen_moscs {
            if live_moscs.get(name) != Some(uid) {
                tracing::info!(
                    "sim build: MachineOSConfig {name} is gone from the API; deleting the builds it \
                     controls and their images (4.20: no in-use check once the MOSC is gone)"
                );
                self.pending_cleanup.insert(name.clone(), uid.clone());
            }
        }
        self.seen_moscs = live_moscs;

        let live_mosbs: HashMap<String, String> = world.mosbs.iter().filter_map(name_uid).collect();
        let gone: Vec<String> = self
            .seen_mosbs
            .iter()
            .filter(|(name, seen)| live_mosbs.get(*name) != Some(&seen.uid))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            let Some(seen) = self.seen_mosbs.remove(&name) else {
                continue;
            };
            let Some(image) = seen.image else { continue };
            let mosc_exists = seen.mosc.as_deref().is_some_and(|m| {
                world
                    .moscs
                    .iter()
                    .any(|c| c.metadata.name.as_deref() == Some(m))
            });
            if mosc_exists {
                self.delete_image_unless_in_use(&image, seen.pool.as_deref(), world, &name)
                    .await?;
            } else {
                tracing::info!(
                    "sim build: MachineOSBuild {name} was deleted and its MachineOSConfig is gone; \
                     deleting its image with no in-use check"
                );
                self.delete_image(&image).await?;
            }
        }
        for mosb in &world.mosbs {
            if let Some((name, uid)) = name_uid(mosb) {
                let label = |key: &str| {
                    mosb.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(key))
                        .cloned()
                };
                self.seen_mosbs.insert(
                    name,
                    SeenMosb {
                        uid,
                        image: str_at(&mosb.data, &["status", "digestedImagePushSpec"])
                            .map(str::to_owned),
                        mosc: str_at(&mosb.data, &["spec", "machineOSConfig", "name"])
                            .map(str::to_owned)
                            .or_else(|| label(LABEL_MOSC)),
                        pool: label(LABEL_POOL),
                    },
                );
            }
        }
        Ok(())
    }

    /// MCO 4.20's in-use check: the image stays if a node of the build's target pool has it as
    /// current or desired image, compared as exact strings against the cached node list.
    async fn delete_image_unless_in_use(
        &self,
        image: &str,
        pool: Option<&str>,
        world: &World,
        build: &str,
    ) -> Result<()> {
        if self.ctx.cfg.in_use_check {
            let pool = pool.and_then(|p| {
                world
                    .pools
                    .iter()
                    .find(|x| x.metadata.name.as_deref() == Some(p))
            });
            let users: Vec<&str> = pool
                .map(|p| pool_members(p, &world.pools, &world.nodes))
                .unwrap_or_default()
                .into_iter()
                .filter(|n| {
                    node_annotation(n, CURRENT_IMAGE) == Some(image)
                        || node_annotation(n, DESIRED_IMAGE) == Some(image)
                })
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            if !users.is_empty() {
                tracing::info!(
                    "sim build: keeping image {image} of {build}: in use by {} (4.20 in-use check)",
                    users.join(", ")
                );
                return Ok(());
            }
        }
        tracing::info!("sim build: image {image} of {build} is not in use; deleting it");
        self.delete_image(image).await
    }

    /// For each deleted MOSC: delete the image of every build it controls (no in-use check),
    /// then the build. Builds of a new MOSC with the same name are left alone.
    async fn cleanup_deleted_moscs(&mut self) -> Result<()> {
        if self.ctx.knobs(|k| k.hold_cleanup) {
            return Ok(());
        }
        let api = mco::mosbs(&self.ctx.client);
        for (mosc, uid) in self.pending_cleanup.clone() {
            let selector = format!("{LABEL_MOSC}={mosc}");
            let builds = api
                .list(&ListParams::default().labels(&selector))
                .await?
                .items;
            let builds: Vec<&DynamicObject> =
                builds.iter().filter(|b| controlled_by(b, &uid)).collect();
            for build in &builds {
                let name = build.metadata.name.clone().unwrap_or_default();
                if let Some(image) = str_at(&build.data, &["status", "digestedImagePushSpec"]) {
                    self.delete_image(image).await?;
                }
                if build.metadata.deletion_timestamp.is_none() {
                    self.delete_mosb(&name, "its MachineOSConfig was deleted")
                        .await?;
                }
            }
            if builds.is_empty() {
                self.pending_cleanup.remove(&mosc);
            }
        }
        Ok(())
    }

    async fn delete_mosb(&self, name: &str, why: &str) -> Result<()> {
        let api = mco::mosbs(&self.ctx.client);
        match self
            .ctx
            .write(
                &format!("deleting MachineOSBuild {name}"),
                api.delete(name, &DeleteParams::background()),
            )
            .await
        {
            Ok(_) => {
                tracing::info!("sim build: deleted MachineOSBuild {name} ({why})");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(format!("deleting MachineOSBuild {name} ({why}): {e}").into()),
        }
    }

    /// Deletes the manifest of a digested pull spec from the registry (as MCO does for external
    /// registries); a manifest that is already gone is fine.
    async fn delete_image(&self, image: &str) -> Result<()> {
        let r = ImageRef::parse(image)?;
        let digest = match (&r.digest, &r.tag) {
            (Some(d), _) => Some(d.clone()),
            (None, Some(tag)) => self.ctx.registry.resolve(&r.repo, tag).await?,
            (None, None) => None,
        };
        let Some(digest) = digest else { return Ok(()) };
        if r.host != self.ctx.registry.host() {
            return Err(format!("refusing to delete {image}: not on the harness registry").into());
        }
        if self.ctx.registry.delete_manifest(&r.repo, &digest).await? {
            tracing::info!("sim build: deleted image {image} from the registry");
        }
        Ok(())
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
                if let Some(image) = str_at(&mosb.data, &["status", "digestedImagePushSpec"]) {
                    self.delete_image_unless_in_use(image, Some(pool), world, mosb_name)
                        .await?;
                }
                self.delete_mosb(mosb_name, "rebuild requested").await
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
        self.start_build(&created).await?;
        tracing::info!(
            "sim build: created MachineOSBuild {mosb_name} for {mosc_name} (rendered config {rendered}); building"
        );
        Ok(())
    }

    /// Records the start of a build: `buildStart` and the conditions of a running build.
    async fn start_build(&mut self, mosb: &DynamicObject) -> Result<()> {
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
            return self.start_build(mosb).await;
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
            "group": "batch", "resource": "jobs", "namespace": MCO_NAMESPACE, "name": format!("build-{name}"),
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
        self.handle_deletions(&world).await?;
        self.cleanup_deleted_moscs().await?;
        // Like MCO 4.20, a MOSC with a deletionTimestamp is still built for and reported on.
        for mosc in &world.moscs {
            self.sync_mosc(mosc, &world).await?;
        }
        let pending = self.pending_cleanup.len();
        if let Ok(mut k) = self.ctx.knobs.lock() {
            k.pending_cleanups = pending;
        }
        Ok(())
    }
}

fn name_uid(obj: &DynamicObject) -> Option<(String, String)> {
    Some((obj.metadata.name.clone()?, obj.metadata.uid.clone()?))
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
