//! The build controller's two delete handlers, as measured on a real 4.20 builder and as each
//! release's `reconciler.go` has them:
//!
//! - every MOSC or MOSB delete event is handled [`super::super::SimConfig::delete_delay`] (5 s)
//!   after the object is gone from the API;
//! - the MOSB-delete handler (`deleteBuilderForMachineOSBuild`) cleans the build's objects,
//!   deletes the image and the digest ConfigMap. With the garbage collector, a deleted MOSC's
//!   MOSBs go ~0.1 s after it, so this is the path that deletes their images;
//! - the MOSC-delete handler (`deleteMachineOSConfig`) then finds no MOSB, unless a MOSB's
//!   deletion was refused, or it survived otherwise (orphaned, or reused by a MOSC recreated with
//!   the same name): for each MOSB with the MOSC's two labels (by controller: that the MOSC
//!   controls; by label, 4.19 and the early 4.20-4.22 z-streams: every one) it deletes the image
//!   first, the digest ConfigMap, then tries the MOSB; a failure requeues the item 5 times
//!   (rate-limited), then every 5 s for as long as it fails (`WrappedQueue.handleErr`);
//! - the in-use check before an image goes (`deleteMOSBImage`): until 4.22 only while a MOSC of
//!   the build's name exists; from 4.23 whenever the build's target pool exists, so the images
//!   it skips after the MOSC is gone stay (leaked). 4.19 only logs a failed image deletion;
//! - an image is deleted by its tag (`spec.renderedImagePushSpec`): the tag is resolved to a
//!   digest and that digest deleted, which removes every tag on it (after a same-name rebuild
//!   the tag names the new image).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, DynamicObject, ListParams};

use super::super::jobs;
use super::super::nodes::pool_members;
use super::super::reconcile::is_not_found;
use super::{BuildController, World, controlled_by, label};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::mco::{
    self, CURRENT_IMAGE, DESIRED_IMAGE, LABEL_MOSC, LABEL_POOL, raw_annotation, str_at,
};
use crate::release::ZStream;

/// Rate-limited requeues of a failing queue item before the builder drops it from the rate
/// limiter and adds it again after its `RetryAfter` (`WrappedQueue.handleErr`; the item is
/// retried for as long as it fails).
const MAX_RETRIES: u32 = 5;
/// First requeue delay of a failing item; it doubles with every requeue (the rate limiter's
/// 5 ms * 2^n).
const RETRY_BASE: Duration = Duration::from_millis(5);

/// An informer delete event, with the object's last state.
pub(super) enum DeleteEvent {
    Mosc(DynamicObject),
    Mosb(DynamicObject),
}

/// A delete event waiting in the builder's queue.
pub(super) struct Queued {
    event: DeleteEvent,
    due: Instant,
    requeues: u32,
}

impl BuildController {
    /// MOSC delete events not handled yet.
    pub(super) fn pending_cleanups(&self) -> usize {
        self.queue
            .iter()
            .filter(|q| matches!(q.event, DeleteEvent::Mosc(_)))
            .count()
    }

    /// The informer delete events: MOSCs and MOSBs seen before that are gone now (or replaced
    /// by a new object of the same name), queued for the builder's delete delay.
    pub(super) fn queue_deletions(&mut self, world: &World) {
        let due = Instant::now() + self.ctx.cfg.delete_delay;
        let live_moscs = by_name(&world.moscs);
        let live_mosbs = by_name(&world.mosbs);
        for (name, seen) in std::mem::replace(&mut self.seen_moscs, live_moscs) {
            if !same_object(self.seen_moscs.get(&name), &seen) {
                tracing::info!(
                    "sim build: MachineOSConfig {name} is gone from the API; its delete event is \
                     handled in {:?}",
                    self.ctx.cfg.delete_delay
                );
                self.queue.push(Queued {
                    event: DeleteEvent::Mosc(seen),
                    due,
                    requeues: 0,
                });
            }
        }
        for (name, seen) in std::mem::replace(&mut self.seen_mosbs, live_mosbs) {
            if !same_object(self.seen_mosbs.get(&name), &seen) {
                tracing::info!(
                    "sim build: MachineOSBuild {name} is gone from the API; its delete event is \
                     handled in {:?}",
                    self.ctx.cfg.delete_delay
                );
                self.builds
                    .remove(&seen.metadata.uid.clone().unwrap_or_default());
                self.queue.push(Queued {
                    event: DeleteEvent::Mosb(seen),
                    due,
                    requeues: 0,
                });
            }
        }
    }

    /// Handles the delete events that are due, requeueing a failed one (rate-limited) up to
    /// [`MAX_RETRIES`] times, then "dropping" it as MCO does: forgotten by the rate limiter and
    /// added again after [`super::super::SimConfig::delete_delay`] (`RetryAfter`, the builder's
    /// `UpdateDelay`), so a failing item is retried until it succeeds. MOSC events wait while
    /// the cleanup is held.
    pub(super) async fn handle_due_deletions(&mut self, world: &World) {
        let hold = self.ctx.knobs(|k| k.hold_cleanup);
        let now = Instant::now();
        let (due, waiting): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|q| q.due <= now && !(hold && matches!(q.event, DeleteEvent::Mosc(_))));
        self.queue = waiting;
        for mut item in due {
            let (what, result) = match &item.event {
                DeleteEvent::Mosc(mosc) => (
                    format!(
                        "MachineOSConfig {}",
                        mosc.metadata.name.as_deref().unwrap_or_default()
                    ),
                    self.machine_os_config_deleted(mosc, world).await,
                ),
                DeleteEvent::Mosb(mosb) => (
                    format!(
                        "MachineOSBuild {}",
                        mosb.metadata.name.as_deref().unwrap_or_default()
                    ),
                    self.machine_os_build_deleted(mosb, world).await,
                ),
            };
            let Err(e) = result else { continue };
            if item.requeues < MAX_RETRIES {
                tracing::info!(
                    "sim build: handling the delete event of {what} failed (requeue {} of \
                     {MAX_RETRIES}): {e}",
                    item.requeues + 1
                );
                item.due = Instant::now() + RETRY_BASE * 2u32.pow(item.requeues);
                item.requeues += 1;
                self.queue.push(item);
            } else {
                tracing::warn!(
                    "sim build: dropping the delete event of {what} out of the queue after \
                     {MAX_RETRIES} requeues, to retry in {:?}: {e}",
                    self.ctx.cfg.delete_delay
                );
                item.due = Instant::now() + self.ctx.cfg.delete_delay;
                item.requeues = 0;
                self.queue.push(item);
            }
        }
    }

    /// `deleteMachineOSConfig`: for every MOSB with the MOSC's two labels that the cleanup
    /// takes ([`cleanup_takes`]: by label on 4.19 and early 4.20-4.22 z-streams, by controller
    /// after), [`Self::delete_machine_os_build`]. Usually the garbage collector has deleted the
    /// deleted MOSC's own builds already and there is nothing to do.
    async fn machine_os_config_deleted(&self, mosc: &DynamicObject, world: &World) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
        let uid = mosc.metadata.uid.clone().unwrap_or_default();
        let pool = str_at(&mosc.data, &["spec", "machineConfigPool", "name"]).unwrap_or_default();
        let selector = format!("{LABEL_POOL}={pool},{LABEL_MOSC}={name}");
        let builds = mco::mosbs(&self.ctx.client)
            .list(&ListParams::default().labels(&selector))
            .await?
            .items;
        let z = self.ctx.z_stream();
        tracing::info!(
            "sim build: removing the MachineOSBuild(s) of deleted MachineOSConfig {name}: {} found \
             ({z}: cleanup by {})",
            builds.len(),
            if z.cleans_up_by_label() {
                "label"
            } else {
                "controller"
            }
        );
        for build in &builds {
            let build_name = build.metadata.name.as_deref().unwrap_or_default();
            if !cleanup_takes(z, build, &uid) {
                tracing::info!(
                    "sim build: skipping MachineOSBuild {build_name}: not controlled by the \
                     deleted MachineOSConfig {name} (uid {uid})"
                );
                continue;
            }
            if !controlled_by(build, &uid) {
                tracing::info!(
                    "sim build: deleting MachineOSBuild {build_name} although the deleted \
                     MachineOSConfig {name} (uid {uid}) does not control it ({z}: no controller \
                     check)"
                );
            }
            self.delete_machine_os_build(build, world).await?;
        }
        Ok(())
    }

    /// The MOSB-delete handler (`deleteBuilderForMachineOSBuild`): the build's Job, ConfigMaps
    /// and Secrets, then the image ([`Self::delete_mosb_image`]), then the digest ConfigMap.
    async fn machine_os_build_deleted(&self, mosb: &DynamicObject, world: &World) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        jobs::clean_build_objects(&self.ctx, mosb).await?;
        let Some(mosc) = label(mosb, LABEL_MOSC) else {
            tracing::warn!(
                "sim build: MachineOSBuild {name} has no {LABEL_MOSC} label; cannot delete its image"
            );
            return Ok(());
        };
        self.delete_image_of(mosb, &mosc, world).await?;
        jobs::delete_digest_configmap(&self.ctx, &name).await
    }

    /// `deleteMachineOSBuild`: the image first ([`Self::delete_mosb_image`]), the digest
    /// ConfigMap, then the MOSB itself (a webhook may refuse that: the error, recorded by
    /// [`super::super::Simulator::refused_by_webhook`]).
    pub(super) async fn delete_machine_os_build(
        &self,
        mosb: &DynamicObject,
        world: &World,
    ) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        let mosc = label(mosb, LABEL_MOSC).unwrap_or_else(|| "<unknown MachineOSConfig>".into());
        self.delete_image_of(mosb, &mosc, world).await?;
        jobs::delete_digest_configmap(&self.ctx, &name).await?;
        self.delete_mosb(&name, &format!("for MachineOSConfig {mosc}"))
            .await
    }

    /// [`Self::delete_mosb_image`]; on 4.19 a failure is only logged (`klog.Warningf`) and the
    /// delete path goes on.
    async fn delete_image_of(&self, mosb: &DynamicObject, mosc: &str, world: &World) -> Result<()> {
        match self.delete_mosb_image(mosb, mosc, world).await {
            Err(e) if !self.ctx.release().image_delete_errors_fail() => {
                tracing::warn!(
                    "sim build: could not delete the image of MachineOSBuild {}: {e} (logged \
                     only, as {} does)",
                    mosb.metadata.name.as_deref().unwrap_or_default(),
                    self.ctx.release()
                );
                Ok(())
            }
            other => other,
        }
    }

    /// `deleteMOSBImage`: the in-use check keeps the image if a node of the MOSB's target pool
    /// has the MOSB's `status.digestedImagePushSpec` as current or desired image, compared as
    /// exact strings (a missing annotation and a missing field are both ""); otherwise the image
    /// of `spec.renderedImagePushSpec` is deleted by its tag. Until 4.22 the check runs only
    /// while a MOSC named `mosc` exists (any uid, terminating or not); from 4.23 whenever the
    /// pool of the build's `target-machine-config-pool` label exists (a build without the label
    /// is an error), so an image it keeps after the MOSC is gone stays in the registry.
    async fn delete_mosb_image(
        &self,
        mosb: &DynamicObject,
        mosc: &str,
        world: &World,
    ) -> Result<()> {
        let name = mosb.metadata.name.clone().unwrap_or_default();
        let mosc_exists = world
            .moscs
            .iter()
            .any(|m| m.metadata.name.as_deref() == Some(mosc));
        let pool_named = |pool_name: &str| {
            world
                .pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(pool_name))
        };
        let pool_label = label(mosb, LABEL_POOL).unwrap_or_default();
        let checked_pool = if !self.ctx.cfg.in_use_check {
            None
        } else if self.ctx.release().checks_pool_after_mosc_is_gone() {
            if pool_label.is_empty() {
                return Err(format!(
                    "MachineOSBuild {name:?} is missing label {LABEL_POOL}, cannot determine if \
                     image is in use"
                )
                .into());
            }
            pool_named(&pool_label)
        } else if mosc_exists {
            Some(pool_named(&pool_label).ok_or_else(|| {
                format!("could not get MachineConfigPool {pool_label:?} of MachineOSBuild {name}")
            })?)
        } else {
            tracing::info!(
                "sim build: MachineOSConfig {mosc} is gone: deleting the image of {name} with no \
                 in-use check"
            );
            None
        };
        if let Some(pool) = checked_pool {
            let digested = str_at(&mosb.data, &["status", "digestedImagePushSpec"]).unwrap_or("");
            let users: Vec<&str> = pool_members(pool, &world.pools, &world.nodes)
                .into_iter()
                .filter(|n| {
                    raw_annotation(n, CURRENT_IMAGE) == digested
                        || raw_annotation(n, DESIRED_IMAGE) == digested
                })
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            if !users.is_empty() {
                let leaked = if mosc_exists {
                    ""
                } else {
                    "; its MachineOSConfig is gone, so it stays in the registry (leaked)"
                };
                tracing::info!(
                    "sim build: keeping the image of {name} ({digested:?}): applied on or desired \
                     by {} ({} in-use check, pool {pool_label}){leaked}",
                    users.join(", "),
                    self.ctx.release()
                );
                self.ctx.update_knobs(|k| {
                    if !k.kept.iter().any(|i| i == digested) {
                        k.kept.push(digested.to_owned());
                    }
                });
                return Ok(());
            }
        }
        let Some(tagged) = str_at(&mosb.data, &["spec", "renderedImagePushSpec"]) else {
            return Ok(());
        };
        self.delete_image_by_tag(tagged, &name).await
    }

    /// Deletes an image by its tag, as containers/image does for a registry that is not the
    /// internal one: resolves the tag to a digest and deletes that manifest, which removes
    /// every tag on it. A tag or manifest already gone is tolerated.
    async fn delete_image_by_tag(&self, tagged: &str, mosb: &str) -> Result<()> {
        let r = ImageRef::parse(tagged)?;
        if !self.ctx.serves(&r.host) {
            return Err(format!(
                "could not delete image {tagged} of {mosb}: pinging container registry {}: \
                 connection refused",
                r.host
            )
            .into());
        }
        let reference = r
            .tag
            .clone()
            .or_else(|| r.digest.clone())
            .unwrap_or_default();
        let Some(digest) = self.ctx.registry.resolve(&r.repo, &reference).await? else {
            tracing::info!("sim build: image {tagged} of {mosb} not found; nothing to delete");
            return Ok(());
        };
        if self.ctx.registry.delete_manifest(&r.repo, &digest).await? {
            tracing::info!(
                "sim build: deleted image {tagged} ({}) of {mosb} from the registry",
                r.with_digest(&digest)
            );
        }
        Ok(())
    }

    pub(super) async fn delete_mosb(&self, name: &str, why: &str) -> Result<()> {
        let api = mco::mosbs(&self.ctx.client);
        // No propagation policy, as MCO: the MOSB's own foregroundDeletion finalizer applies.
        match self
            .ctx
            .write(
                &format!("deleting MachineOSBuild {name}"),
                api.delete(name, &DeleteParams::default()),
            )
            .await
        {
            Ok(_) => {
                tracing::info!("sim build: deleted MachineOSBuild {name} ({why})");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(format!("could not delete MachineOSBuild {name} ({why}): {e}").into()),
        }
    }
}

/// Whether the MOSC-delete cleanup of `z` takes `build` (labelled with the deleted MOSC's name
/// and pool) when the deleted MOSC's uid is `deleted_uid`: every one by label, else only one
/// the deleted MOSC controls (`metav1.IsControlledBy`).
pub(super) fn cleanup_takes(z: ZStream, build: &DynamicObject, deleted_uid: &str) -> bool {
    z.cleans_up_by_label() || controlled_by(build, deleted_uid)
}

/// Objects by name.
pub(super) fn by_name(objects: &[DynamicObject]) -> HashMap<String, DynamicObject> {
    objects
        .iter()
        .filter_map(|o| Some((o.metadata.name.clone()?, o.clone())))
        .collect()
}

/// Whether `live` is the object `seen` (same uid), not a new one of the same name or none.
fn same_object(live: Option<&DynamicObject>, seen: &DynamicObject) -> bool {
    live.is_some_and(|l| l.metadata.uid == seen.metadata.uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::{CleanupFix, Release, TABLE};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn build(controller_uid: Option<&str>) -> DynamicObject {
        let mut b = DynamicObject::new("worker-1", &mco::mosb_resource());
        b.metadata.owner_references = controller_uid.map(|uid| {
            vec![OwnerReference {
                api_version: "machineconfiguration.openshift.io/v1".into(),
                kind: "MachineOSConfig".into(),
                name: "worker".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        b
    }

    /// Each row's cleanup, as the delete handler applies it: a build the deleted MOSC controls
    /// always goes; one of a recreated MOSC or an orphan goes only where the row's z-stream
    /// cleans up by label (4.19, the early side of a backport).
    #[test]
    fn the_cleanup_takes_what_each_rows_z_stream_takes() {
        let own = build(Some("deleted"));
        let recreated = build(Some("recreated"));
        let orphan = build(None);
        for row in TABLE {
            for z in [row.release.early(), row.release.late()] {
                let by_label = match row.cleanup_fix {
                    CleanupFix::Never => true,
                    CleanupFix::Backported { .. } => z == row.release.early(),
                    CleanupFix::FromStart => false,
                };
                assert!(cleanup_takes(z, &own, "deleted"), "{z}");
                assert_eq!(cleanup_takes(z, &recreated, "deleted"), by_label, "{z}");
                assert_eq!(cleanup_takes(z, &orphan, "deleted"), by_label, "{z}");
            }
        }
        assert!(cleanup_takes(Release::V4_20.early(), &orphan, "deleted"));
        assert!(!cleanup_takes(Release::V4_20.late(), &orphan, "deleted"));
    }
}
