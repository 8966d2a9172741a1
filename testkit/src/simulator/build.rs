//! The build controller (machine-os-builder), acting as its service account: one MachineOSBuild
//! and one pushed image per (MOSC, build inputs), shaped as the played release's MCO writes them
//! ([`crate::release`]: 4.19 to 4.23), with the build's Job, ConfigMaps and Secrets
//! ([`super::jobs`]). What each release's `pkg/controller/build/reconciler.go` does, pass by pass over what the API server shows:
//!
//! - a MOSC whose pool's `spec.configuration` (or spec) has no build yet gets one ([`start`]):
//!   created, then started (`startBuild`): every other build of the MOSC that has not
//!   succeeded is deleted first (`deleteOtherBuildsForMachineOSConfig`; an error aborts the
//!   start, retried on the next pass), then the Job (a Job that cannot be created leaves the
//!   MOSB unstarted, and the start is retried: MCO does not delete it), then the MOSC's
//!   `current-machine-os-build` annotation names the build, while `currentImagePullSpec` still
//!   holds the previous image;
//! - a build that succeeds points the MOSC's `currentImagePullSpec` at its image (4.21 on: and
//!   `status.machineOSBuild`) ([`finish`]);
//! - a build that exists for the inputs is reused, whoever controls it
//!   (`reuseExistingMachineOSBuildIfPossible`: a MOSC recreated with the same name takes over
//!   the build of the one it replaces), other unsucceeded builds deleted; a reused build whose
//!   image tag is gone is deleted and built again;
//! - the rebuild annotation deletes the current build (image first, under the in-use check)
//!   and builds again;
//! - no build is created or reused for a MOSC whose pool is NodeDegraded, RenderDegraded,
//!   PinnedImageSetsDegraded or SynchronizerDegraded (`createNewMachineOSBuildOrReuseExisting`'s
//!   `shouldPreventBuildDueToDegradation`; 4.19's `IsPoolAnyDegraded`: Degraded, NodeDegraded or
//!   RenderDegraded; [`crate::release::Row::builds_wait_while`]): the build waits until the pool
//!   is no longer degraded (the simulated pool status sets only NodeDegraded and Degraded);
//! - 4.21 on, a MOSC annotated with a pre-built image gets a synthetic build ([`prebuilt`]);
//! - the two delete handlers ([`deletes`]), which are where the releases differ most.
//!
//! Not modelled: MachineConfigs. Every config change a test makes needs a new image (as an
//! extension or kernel-argument change does); 4.20's reuse of the previous image for a change
//! that needs none (`reuseImageForNewMOSB` without a build) is not played. A build being deleted
//! (its `foregroundDeletion` pending) is waited for, not reused (MCO would name it for the
//! moment until it is gone).

mod deletes;
mod finish;
mod prebuilt;
mod start;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::ctx::Ctx;
use super::reconcile::Reconciler;
use crate::Result;
use crate::mco::{self, CURRENT_MOSB, LABEL_PRE_BUILT, REBUILD, condition_true, str_at};
use crate::release::Release;
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
    /// MOSBs (uids) this process created for a rebuild annotation still on their MOSC: the
    /// build that replaces the deleted one, not the one to delete.
    rebuilt: HashSet<String>,
    /// MOSCs whose build is refused while their pool is NodeDegraded (logged once each time).
    refused: HashSet<String>,
}

/// One pass's view of the cluster (MCO's informer caches).
struct World {
    moscs: Vec<DynamicObject>,
    mosbs: Vec<DynamicObject>,
    pools: Vec<DynamicObject>,
    nodes: Vec<Node>,
}

impl World {
    fn mosb(&self, name: &str) -> Option<&DynamicObject> {
        self.mosbs
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(name))
    }
}

impl BuildController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            seen_moscs: HashMap::new(),
            seen_mosbs: HashMap::new(),
            queue: Vec::new(),
            builds: HashMap::new(),
            rebuilt: HashSet::new(),
            refused: HashSet::new(),
        }
    }

    /// A restarted builder: nothing queued, nothing remembered, and what exists now is what its
    /// new informers list (no delete event for what went before).
    fn restart(&mut self, world: &World) {
        let lost = self.queue.len();
        self.queue.clear();
        self.builds.clear();
        self.rebuilt.clear();
        self.seen_moscs = deletes::by_name(&world.moscs);
        self.seen_mosbs = deletes::by_name(&world.mosbs);
        tracing::info!(
            "sim build: machine-os-builder restarted; {lost} queued delete event(s) lost"
        );
    }

    /// Builds for one MOSC: seed, create, start, reuse or finish its build for the pool's
    /// current config.
    async fn sync_mosc(&mut self, mosc: &DynamicObject, world: &World) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
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
        if self.ctx.release().seeds_pre_built_images() && prebuilt::image(mosc).is_some() {
            if current_build_annotation(mosc).is_none() {
                return self.seed_pre_built(mosc, pool, world).await;
            }
            if str_at(&mosc.data, &["status", "currentImagePullSpec"]).is_some() {
                return self.drop_pre_built_annotation(mosc).await;
            }
        }
        let rendered = mco::pool_target_config(pool);
        let mosb_name = mosb_name(&name, mosc, &rendered);
        let existing = world.mosb(&mosb_name);
        let rebuild = mosc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(REBUILD));
        if rebuild && self.rebuild_pending(mosc, existing, world).await? {
            return Ok(());
        }
        let current =
            existing.is_some_and(|b| b.metadata.name.as_deref() == current_build_annotation(mosc));
        if self.refused_while_degraded(&name, pool, existing.is_none() || !current) {
            return Ok(());
        }
        match existing {
            None => {
                self.create_mosb(mosc, pool_name, &rendered, &mosb_name, rebuild, world)
                    .await
            }
            Some(mosb) if mosb.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(mosb) if condition_true(mosb, "Succeeded") => self.reuse(mosc, mosb, world).await,
            Some(mosb) if condition_true(mosb, "Failed") || condition_true(mosb, "Interrupted") => {
                Ok(())
            }
            // A synthetic build is never built (its status comes with its creation).
            Some(mosb) if label(mosb, LABEL_PRE_BUILT).as_deref() == Some("true") => Ok(()),
            Some(mosb) => self.progress(mosc, mosb, world).await,
        }
    }
}

impl BuildController {
    /// Whether MOSC `name`'s build (`new`: one to create or reuse, not the one it names) is
    /// refused because `pool` is degraded ([`prevents_build`]). A build the MOSC already names
    /// carries on (its status is still reported).
    fn refused_while_degraded(&mut self, name: &str, pool: &DynamicObject, new: bool) -> bool {
        let why = prevents_build(self.ctx.release(), pool).filter(|_| new);
        let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
        if let Some(condition) = why
            && self.refused.insert(name.to_owned())
        {
            tracing::info!(
                "sim build: no build for MachineOSConfig {name}: pool {pool_name} is {condition}"
            );
        } else if why.is_none() && self.refused.remove(name) {
            tracing::info!(
                "sim build: pool {pool_name} is no longer degraded; MachineOSConfig {name} may build"
            );
        }
        why.is_some()
    }
}

impl Reconciler for BuildController {
    async fn sync(&mut self) -> Result<()> {
        let world = World {
            moscs: self.ctx.list(&mco::moscs(&self.ctx.client)).await?,
            mosbs: self.ctx.list(&mco::mosbs(&self.ctx.client)).await?,
            pools: self.ctx.list(&mco::mcps(&self.ctx.client)).await?,
            nodes: self.ctx.list(&mco::nodes(&self.ctx.client)).await?,
        };
        // A build deleted while it ran is never finished.
        self.builds.retain(|uid, _| {
            world
                .mosbs
                .iter()
                .any(|b| b.metadata.uid.as_ref() == Some(uid))
        });
        let restart = self.ctx.knobs(|k| k.restart_builder);
        if restart {
            self.ctx.update_knobs(|k| k.restart_builder = false);
            self.restart(&world);
        }
        self.queue_deletions(&world);
        self.handle_due_deletions(&world).await;
        let pending = self.pending_cleanups();
        self.ctx.update_knobs(|k| k.pending_cleanups = pending);
        // Like MCO 4.20, a MOSC with a deletionTimestamp is still built for and reported on.
        // One MOSC's error does not hold up the others (each is its own queue item in MCO).
        let mut first_error = None;
        for mosc in &world.moscs {
            if let Err(e) = self.sync_mosc(mosc, &world).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn waiting(&self) -> bool {
        !self.queue.is_empty() || !self.builds.is_empty()
    }
}

/// The condition of `pool` that stops a new or reused build on `release`, if one is True
/// ([`crate::release::Row::builds_wait_while`]).
fn prevents_build(release: Release, pool: &DynamicObject) -> Option<&'static str> {
    release
        .row()
        .builds_wait_while
        .iter()
        .copied()
        .find(|c| condition_true(pool, c))
}

fn label(obj: &DynamicObject, key: &str) -> Option<String> {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
}

/// The MOSC's `current-machine-os-build` annotation, if set and not empty.
fn current_build_annotation(mosc: &DynamicObject) -> Option<&str> {
    mosc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CURRENT_MOSB))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Whether `obj`'s controller ownerReference names `uid` (`metav1.IsControlledBy`).
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(conditions: &[(&str, &str)]) -> DynamicObject {
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, s)| json!({"type": t, "status": s}))
            .collect();
        DynamicObject::new("worker", &mco::mcp_resource())
            .data(json!({"status": {"conditions": conditions}}))
    }

    /// Every degradation but the build's own stops builds from 4.20 (a simulator that checked
    /// NodeDegraded alone would build here); 4.19 also stops on `Degraded` alone.
    #[test]
    fn builds_wait_while_the_pool_is_degraded_for_any_reason_but_the_build() {
        for release in Release::ALL {
            for condition in ["NodeDegraded", "RenderDegraded"] {
                assert_eq!(
                    prevents_build(release, &pool(&[(condition, "True")])),
                    Some(condition),
                    "{release:?}"
                );
            }
            let from_4_20 = release >= Release::V4_20;
            for condition in ["PinnedImageSetsDegraded", "SynchronizerDegraded"] {
                assert_eq!(
                    prevents_build(release, &pool(&[(condition, "True")])).is_some(),
                    from_4_20,
                    "{release:?} {condition}"
                );
            }
            // A build failure alone (Degraded via ImageBuildDegraded) is retried from 4.20.
            let build_failed = pool(&[("Degraded", "True"), ("ImageBuildDegraded", "True")]);
            assert_eq!(prevents_build(release, &build_failed).is_some(), !from_4_20);
            assert_eq!(
                prevents_build(release, &pool(&[("NodeDegraded", "False")])),
                None
            );
        }
    }
}
