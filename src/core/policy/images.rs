//! What a deletion removes from the registry, as MCO's machine-os-builder decides it
//! (docs/policy.md, rule 1): the builds a MachineOSConfig's cleanup and the garbage collector
//! delete, each build's image by its tag (`<repo>:<mosb-name>`, so the digest the tag points at),
//! only with the `machine-os-config` label. The guard protects exactly those images, no more: an
//! image MCO keeps can degrade no node, and guarding it anyway is a refusal that never ends.

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::image::ImageKey;
use crate::core::model::{MachineOSBuild, MachineOSConfig};
use crate::core::release::Cleanup;
use crate::core::snapshot::Snapshot;

use super::verdict::{Deletion, GuardedImage};

/// The images a deletion would remove, and how to recognise them on nodes.
#[derive(Default)]
pub(super) struct GuardedImages {
    exact: HashMap<ImageKey, GuardedImage>,
}

impl GuardedImages {
    pub(super) fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Digest hex of every image, or `None` if one has no digest.
    pub(super) fn digests<C: FromIterator<String>>(&self) -> Option<C> {
        self.exact
            .keys()
            .map(|k| k.digest_hex().map(str::to_string))
            .collect()
    }

    /// The images, sorted by pull spec.
    pub(super) fn listed(&self) -> Vec<GuardedImage> {
        let mut images: Vec<_> = self.exact.values().cloned().collect();
        images.sort_by(|a, b| a.image.cmp(&b.image));
        images
    }

    fn add(&mut self, spec: &str, build: &str) {
        let spec = spec.trim();
        if spec.is_empty() {
            return;
        }
        self.exact
            .entry(ImageKey::parse(spec))
            .or_insert_with(|| GuardedImage {
                image: spec.to_string(),
                machine_os_build: Some(build.to_string()),
            });
    }

    /// The guarded image `spec` is (registry identity, see [`crate::core::image`]), if any. Nodes
    /// almost always carry the exact text the build recorded, so that is tried before parsing.
    pub(super) fn find(&self, spec: &str) -> Option<&GuardedImage> {
        let spec = spec.trim();
        self.exact
            .values()
            .find(|g| g.image == spec)
            .or_else(|| self.exact.get(&ImageKey::parse(spec)))
    }
}

/// The images deleting `target` removes: those of the builds it deletes (a MachineOSConfig's),
/// or the build's own; none of a build without the `machine-os-config` label.
pub(super) fn guarded_images(snapshot: &Snapshot, target: Deletion<'_>) -> GuardedImages {
    let builds = &snapshot.machine_os_builds;
    let mut guarded = GuardedImages::default();
    match target {
        Deletion::MachineOSConfig(mosc) => {
            for build in deleted_with(snapshot, mosc) {
                if build.config_label().is_some()
                    && let Some(image) = tag_target(build, Some(mosc), builds)
                {
                    guarded.add(image, build.name());
                }
            }
        }
        Deletion::MachineOSBuild(mosb) => {
            if let Some(config) = mosb.config_label()
                && let Some(image) = tag_target(mosb, snapshot.machine_os_config(config), builds)
            {
                guarded.add(image, mosb.name());
            }
        }
    }
    guarded
}

/// The builds that go with `mosc`: the ones MCO's cleanup deletes (by the release's rule) and
/// the ones the garbage collector deletes. A config without a uid (a hand-written file) cannot
/// be matched by ownerReference, so every build that names it counts.
pub fn deleted_with<'s>(
    snapshot: &'s Snapshot,
    mosc: &MachineOSConfig,
) -> impl Iterator<Item = &'s MachineOSBuild> {
    let cleanup = snapshot.rules().cleanup;
    let uid = mosc.uid().map(str::to_string);
    let (name, pool) = (mosc.name().to_string(), mosc.pool_name().to_string());
    snapshot
        .machine_os_builds
        .iter()
        .map(AsRef::as_ref)
        .filter(move |b| match uid.as_deref() {
            Some(uid) => cleaned_up(b, &name, &pool, uid, cleanup) || b.only_owner_is(uid),
            None => b.belongs_to(&name),
        })
}

/// MCO's cleanup selection: `MachineOSBuildForPoolSelector` (both labels); from 4.20 on, then
/// `metav1.IsControlledBy` (a recreated config of the same name keeps its own builds).
fn cleaned_up(
    build: &MachineOSBuild,
    config: &str,
    pool: &str,
    uid: &str,
    cleanup: Cleanup,
) -> bool {
    let labelled = build.config_label() == Some(config) && build.pool_label() == Some(pool);
    labelled
        && match cleanup {
            Cleanup::ByLabel => true,
            Cleanup::ByController => build.controller_uid() == Some(uid),
        }
}

/// The image a build's tag points at, as far as the objects show: its own digest once built;
/// before that, the config's current image if the config names this build as current and no
/// other build of the config carries that image (so it came from an earlier build of this very
/// name, a same-name rebuild); otherwise nothing (the tag was never pushed).
fn tag_target<'a>(
    build: &'a MachineOSBuild,
    config: Option<&'a MachineOSConfig>,
    builds: &[Arc<MachineOSBuild>],
) -> Option<&'a str> {
    if let Some(own) = build.digested_image() {
        return Some(own);
    }
    let config = config.filter(|c| c.names_as_current(build.name()))?;
    let current = config.current_image()?;
    let key = ImageKey::parse(current);
    let from_another = builds.iter().any(|b| {
        b.name() != build.name()
            && b.belongs_to(config.name())
            && b.digested_image()
                .is_some_and(|d| ImageKey::parse(d) == key)
    });
    (!from_another).then_some(current)
}
