//! What deleting a build takes with it from the registry: MCO deletes by the build's tag, and the
//! registry deletes that tag's **digest** with every tag on it. So a build whose image a kept build
//! carries (4.20's `reuseImageForNewMOSB`) is kept, until no such build is left; and a build that
//! pushed nothing is kept while a node or config uses an image of its repository no build carries
//! (its tag may still hold an earlier same-name build's image).

use std::collections::HashSet;

use crate::core::image::{ImageKey, abbreviate, repo_of};
use crate::core::snapshot::Snapshot;

use super::{Keep, Planned};

pub(super) fn add(builds: &mut [Planned], snapshot: &Snapshot) {
    shares_image(builds);
    earlier_image_under_tag(builds, snapshot);
}

fn shares_image(builds: &mut [Planned]) {
    loop {
        let kept: Vec<(ImageKey, String)> = builds
            .iter()
            .filter(|b| !b.deletable())
            .flat_map(|b| {
                b.image
                    .iter()
                    .chain(&b.deletes)
                    .map(|i| (ImageKey::parse(i), b.name.clone()))
            })
            .collect();
        let mut changed = false;
        for build in builds.iter_mut().filter(|b| b.deletable()) {
            let hit = build.deletes.iter().find_map(|image| {
                let key = ImageKey::parse(image);
                kept.iter()
                    .find(|(k, owner)| *k == key && *owner != build.name)
                    .map(|(_, owner)| (image.clone(), owner.clone()))
            });
            if let Some((image, owner)) = hit {
                build.keep(
                    Keep::SharesImage,
                    format!(
                        "deleting it deletes image {}, which the kept build {owner} also carries \
                         (the registry deletes the digest with every tag on it)",
                        abbreviate(&image)
                    ),
                );
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

fn earlier_image_under_tag(builds: &mut [Planned], snapshot: &Snapshot) {
    let candidates: Vec<usize> = builds
        .iter()
        .enumerate()
        .filter(|(_, b)| b.deletable() && b.image.is_none() && b.deletes.is_empty())
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return;
    }
    let uncarried = uncarried(snapshot);
    for i in candidates {
        let Some(repo) = builds[i].tag.as_deref().and_then(repo_of) else {
            continue;
        };
        let in_repo = uncarried
            .iter()
            .find(|(image, _)| repo_of(image).as_ref() == Some(&repo));
        if let Some((image, user)) = in_repo {
            let tag = builds[i].tag.clone().unwrap_or_default();
            builds[i].keep(
                Keep::EarlierImageUnderTag,
                format!(
                    "it has no image of its own, but its tag {tag} may still hold the image of an \
                     earlier build of the same name: {user} uses {}, which no build carries",
                    abbreviate(image)
                ),
            );
        }
    }
}

/// Images nodes and configs use that no build carries, with who uses each.
fn uncarried(snapshot: &Snapshot) -> Vec<(String, String)> {
    let carried: HashSet<ImageKey> = snapshot
        .machine_os_builds
        .iter()
        .filter_map(|b| b.digested_image())
        .map(ImageKey::parse)
        .collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut images = Vec::new();
    let mut note = |image: &str, user: String| {
        if !carried.contains(&ImageKey::parse(image)) {
            images.push((image.to_string(), user));
        }
    };
    for node in &snapshot.nodes {
        for image in [node.desired_image(), node.current_image()]
            .into_iter()
            .flatten()
        {
            // Nodes share interned strings: each distinct image is parsed once.
            if seen.insert(image) {
                note(image, format!("node {}", node.name()));
            }
        }
    }
    for config in &snapshot.machine_os_configs {
        if let Some(image) = config.current_image().filter(|i| seen.insert(i)) {
            note(image, format!("MachineOSConfig {}", config.name()));
        }
    }
    images
}
