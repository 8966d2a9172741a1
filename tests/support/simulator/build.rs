//! The build controller (machine-os-builder): one MachineOSBuild and one pushed image per
//! (MOSC, rendered config); MOSC status; and the 4.20 image cleanup when a MOSC or MOSB goes away.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::super::Result;
use super::super::image_ref::ImageRef;
use super::super::mco::{
    self, CURRENT_MOSB, GROUP, LABEL_MOSC, LABEL_POOL, LABEL_RENDERED, REBUILD, condition_true,
    str_at,
};
use super::{Ctx, Reconciler, is_conflict, is_not_found, now_rfc3339};

/// A MOSB as last seen, so its image can be cleaned up once it is gone.
struct SeenMosb {
    uid: String,
    image: Option<String>,
}

pub(super) struct BuildController {
    ctx: Ctx,
    /// MOSC name -> uid, as of the previous pass.
    seen_moscs: HashMap<String, String>,
    /// MOSB name -> last seen state.
    seen_mosbs: HashMap<String, SeenMosb>,
    /// Deleted MOSCs (name -> uid) whose MOSBs still have to be cleaned up.
    pending_cleanup: BTreeMap<String, String>,
    /// When each running build (MOSB uid) started.
    builds: HashMap<String, Instant>,
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
    async fn handle_deletions(
        &mut self,
        moscs: &[DynamicObject],
        mosbs: &[DynamicObject],
    ) -> Result<()> {
        let live_moscs: HashMap<String, String> = moscs.iter().filter_map(name_uid).collect();
        for (name, uid) in &self.seen_moscs {
            if live_moscs.get(name) != Some(uid) {
                tracing::info!(
                    "sim build: MachineOSConfig {name} is gone from the API; deleting all its builds and \
                     images (4.20: no in-use check once the MOSC is gone)"
                );
                self.pending_cleanup.insert(name.clone(), uid.clone());
            }
        }
        self.seen_moscs = live_moscs;

        let live_mosbs: HashMap<String, String> = mosbs.iter().filter_map(name_uid).collect();
        let gone: Vec<(String, Option<String>)> = self
            .seen_mosbs
            .iter()
            .filter(|(name, seen)| live_mosbs.get(*name) != Some(&seen.uid))
            .map(|(name, seen)| (name.clone(), seen.image.clone()))
            .collect();
        for (name, image) in gone {
            tracing::info!("sim build: MachineOSBuild {name} was deleted; deleting its image");
            if let Some(image) = image {
                self.delete_image(&image).await?;
            }
            self.seen_mosbs.remove(&name);
        }
        for mosb in mosbs {
            if let Some((name, uid)) = name_uid(mosb) {
                let image =
                    str_at(&mosb.data, &["status", "digestedImagePushSpec"]).map(str::to_owned);
                self.seen_mosbs.insert(name, SeenMosb { uid, image });
            }
        }
        Ok(())
    }

    /// For each deleted MOSC: delete every image of its MOSBs, then the MOSBs (no in-use check).
    async fn cleanup_deleted_moscs(&mut self) -> Result<()> {
        let api = mco::mosbs(&self.ctx.client);
        for (mosc, uid) in self.pending_cleanup.clone() {
            let selector = format!("{LABEL_MOSC}={mosc}");
            let builds = api
                .list(&ListParams::default().labels(&selector))
                .await?
                .items;
            // Only builds of the deleted MOSC (not of a new MOSC with the same name).
            let builds: Vec<&DynamicObject> = builds
                .iter()
                .filter(|b| owned_by_or_orphan(b, &uid))
                .collect();
            for build in &builds {
                let name = build.metadata.name.clone().unwrap_or_default();
                if let Some(image) = str_at(&build.data, &["status", "digestedImagePushSpec"]) {
                    self.delete_image(image).await?;
                }
                if build.metadata.deletion_timestamp.is_none() {
                    match api.delete(&name, &DeleteParams::background()).await {
                        Ok(_) => tracing::info!("sim build: deleted MachineOSBuild {name}"),
                        Err(e) if is_not_found(&e) => {}
                        Err(e) => return Err(format!("deleting MachineOSBuild {name}: {e}").into()),
                    }
                }
            }
            if builds.is_empty() {
                self.pending_cleanup.remove(&mosc);
            }
        }
        Ok(())
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
    async fn sync_mosc(
        &mut self,
        mosc: &DynamicObject,
        pools: &[DynamicObject],
        mosbs: &[DynamicObject],
    ) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
        let Some(pool_name) = str_at(&mosc.data, &["spec", "machineConfigPool", "name"]) else {
            return Ok(());
        };
        let Some(pool) = pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool_name))
        else {
            return Ok(());
        };
        let rendered = mco::pool_target_config(pool);
        let mosb_name = mosb_name(&name, mosc, &rendered);
        let existing = mosbs
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(mosb_name.as_str()));

        let rebuild = mosc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(REBUILD));
        if rebuild {
            return self.rebuild(&name, existing).await;
        }
        match existing {
            None => {
                self.create_mosb(mosc, pool_name, &rendered, &mosb_name)
                    .await
            }
            Some(mosb) if mosb.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(mosb) if condition_true(mosb, "Succeeded") => self.point_mosc_at(mosc, mosb).await,
            Some(mosb) if condition_true(mosb, "Failed") || condition_true(mosb, "Interrupted") => {
                Ok(())
            }
            Some(mosb) => self.finish_build(mosc, mosb).await,
        }
    }

    /// The rebuild annotation: delete the current build and its image, then drop the annotation
    /// (the next pass creates a fresh build with a new image).
    async fn rebuild(&mut self, mosc: &str, existing: Option<&DynamicObject>) -> Result<()> {
        if let Some(mosb) = existing {
            let name = mosb.metadata.name.clone().unwrap_or_default();
            tracing::info!(
                "sim build: rebuild requested for {mosc}; deleting {name} and its image"
            );
            if let Some(image) = str_at(&mosb.data, &["status", "digestedImagePushSpec"]) {
                self.delete_image(image).await?;
            }
            match mco::mosbs(&self.ctx.client)
                .delete(&name, &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    return Err(format!("deleting MachineOSBuild {name} for rebuild: {e}").into());
                }
            }
        }
        let patch = json!({"metadata": {"annotations": {REBUILD: null}}});
        mco::moscs(&self.ctx.client)
            .patch(mosc, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

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
        mosb.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: format!("{GROUP}/v1"),
                kind: "MachineOSConfig".to_owned(),
                name: mosc_name.clone(),
                uid: mosc.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]);
        let api = mco::mosbs(&self.ctx.client);
        let created = match api.create(&PostParams::default(), &mosb).await {
            Ok(created) => created,
            Err(e) if is_conflict(&e) => return Ok(()),
            Err(e) => return Err(format!("creating MachineOSBuild {mosb_name}: {e}").into()),
        };
        let now = now_rfc3339();
        let status = json!({"status": {
            "conditions": conditions(&now, &[("Prepared", true), ("Building", true), ("Succeeded", false),
                                              ("Failed", false), ("Interrupted", false)]),
            "buildStart": now,
            "builder": {"imageBuilderType": "Job"},
        }});
        api.patch_status(mosb_name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        if let Some(uid) = created.metadata.uid {
            self.builds.insert(uid, Instant::now());
        }
        tracing::info!(
            "sim build: created MachineOSBuild {mosb_name} for {mosc_name} (rendered config {rendered}); building"
        );
        Ok(())
    }

    /// Once the build has run for `build_delay`: push the image and mark the MOSB Succeeded.
    async fn finish_build(&mut self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        let uid = mosb.metadata.uid.clone().unwrap_or_default();
        let started = *self.builds.entry(uid.clone()).or_insert_with(Instant::now);
        if started.elapsed() < self.ctx.cfg.build_delay {
            return Ok(());
        }
        let push_spec = str_at(&mosb.data, &["spec", "renderedImagePushSpec"])
            .ok_or_else(|| format!("MachineOSBuild {name} has no spec.renderedImagePushSpec"))?;
        let target = ImageRef::parse(push_spec)?;
        let api = mco::mosbs(&self.ctx.client);
        let now = now_rfc3339();
        if target.host != self.ctx.registry.host() {
            tracing::warn!(
                "sim build: {name} pushes to {}, not the harness registry; failing it",
                target.host
            );
            let status = json!({"status": {
                "conditions": conditions(&now, &[("Prepared", true), ("Building", false), ("Succeeded", false),
                                                  ("Failed", true), ("Interrupted", false)]),
                "buildEnd": now,
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            return Ok(());
        }
        let tag = target.tag.clone().unwrap_or_else(|| name.clone());
        let digest = self.ctx.registry.push_image(&target.repo, &tag).await?;
        let digested = target.with_digest(&digest);
        let status = json!({"status": {
            "conditions": conditions(&now, &[("Prepared", true), ("Building", false), ("Succeeded", true),
                                              ("Failed", false), ("Interrupted", false)]),
            "digestedImagePushSpec": digested,
            "buildEnd": now,
        }});
        let updated = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        self.builds.remove(&uid);
        tracing::info!("sim build: MachineOSBuild {name} succeeded; pushed {digested}");
        self.point_mosc_at(mosc, &updated).await
    }

    /// Sets the MOSC's status.currentImagePullSpec / machineOSBuild and its
    /// current-machine-os-build annotation to a succeeded build, if not already so.
    async fn point_mosc_at(&self, mosc: &DynamicObject, mosb: &DynamicObject) -> Result<()> {
        let mosc_name = mosc.metadata.name.clone().unwrap_or_default();
        let mosb_name = mosb.metadata.name.clone().unwrap_or_default();
        let Some(image) = str_at(&mosb.data, &["status", "digestedImagePushSpec"]) else {
            return Ok(());
        };
        let api = mco::moscs(&self.ctx.client);
        if str_at(&mosc.data, &["status", "currentImagePullSpec"]) != Some(image)
            || str_at(&mosc.data, &["status", "machineOSBuild", "name"]) != Some(mosb_name.as_str())
        {
            let status = json!({"status": {
                "currentImagePullSpec": image,
                "machineOSBuild": {"group": GROUP, "resource": "machineosbuilds", "name": mosb_name},
                "observedGeneration": mosc.metadata.generation,
            }});
            api.patch_status(&mosc_name, &PatchParams::default(), &Patch::Merge(&status))
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
            api.patch(&mosc_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
}

impl Reconciler for BuildController {
    async fn sync(&mut self) -> Result<()> {
        let moscs = mco::list_all(&mco::moscs(&self.ctx.client)).await?;
        let mosbs = mco::list_all(&mco::mosbs(&self.ctx.client)).await?;
        let pools = mco::list_all(&mco::mcps(&self.ctx.client)).await?;
        self.handle_deletions(&moscs, &mosbs).await?;
        self.cleanup_deleted_moscs().await?;
        // Like MCO 4.20, a MOSC with a deletionTimestamp is still built for and reported on.
        for mosc in &moscs {
            self.sync_mosc(mosc, &pools, &mosbs).await?;
        }
        Ok(())
    }
}

fn name_uid(obj: &DynamicObject) -> Option<(String, String)> {
    Some((obj.metadata.name.clone()?, obj.metadata.uid.clone()?))
}

/// Whether `obj` is owned by `uid` or has no owner at all.
fn owned_by_or_orphan(obj: &DynamicObject, uid: &str) -> bool {
    match &obj.metadata.owner_references {
        None => true,
        Some(refs) => refs.is_empty() || refs.iter().any(|r| r.uid == uid),
    }
}

/// `<mosc>-<hash>`: the hash covers the MOSC spec and the rendered config, like MCO's name.
fn mosb_name(mosc_name: &str, mosc: &DynamicObject, rendered: &str) -> String {
    let spec = mosc.data.get("spec").cloned().unwrap_or(Value::Null);
    let mut hasher = Sha256::new();
    hasher.update(spec.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(rendered.as_bytes());
    let hash: String = hasher
        .finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{mosc_name}-{hash}")
}

/// MOSB-style conditions, all with the same transition time.
fn conditions(now: &str, states: &[(&str, bool)]) -> Vec<Value> {
    states
        .iter()
        .map(|(type_, on)| {
            json!({
                "type": type_,
                "status": if *on { "True" } else { "False" },
                "reason": type_,
                "message": if *on { format!("Build {type_}") } else { String::new() },
                "lastTransitionTime": now,
            })
        })
        .collect()
}
