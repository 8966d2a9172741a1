//! What the cluster names in the registry, read from the snapshot: the tags and digests of
//! MachineOSBuilds, the digests nodes want or run, the images and tags of MachineOSConfigs.
//!
//! Digests are read from every string in any spelling ([`digests_in`]: a tag with a digest,
//! upper-case hex, another spelling of the host): a digest is what a registry deletes, and one
//! spelling missed would delete what a node needs. A digest counts whichever repository names
//! it (a copy of an image elsewhere, a mirror): keeping too much costs disk, not a node.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::core::image::{ImageKey, RepoKey, digests_in};
use crate::core::registry::Need;
use crate::core::snapshot::Snapshot;

/// Everything the snapshot names.
#[derive(Debug, Default)]
pub struct Named {
    /// `(repository, tag)` -> the build whose `spec.renderedImagePushSpec` it is.
    pub build_tags: HashMap<(RepoKey, String), String>,
    /// digest -> a build carrying it (`status.digestedImagePushSpec`).
    pub build_digests: HashMap<String, String>,
    /// digest -> the nodes wanting or running it, by name.
    pub node_digests: HashMap<String, BTreeMap<String, Need>>,
    /// digest -> the MachineOSConfigs naming it (current image, annotations).
    pub config_digests: HashMap<String, Vec<String>>,
    /// `(repository, tag)` -> the MachineOSConfigs whose push spec it is.
    pub config_tags: HashMap<(RepoKey, String), Vec<String>>,
}

impl Named {
    pub fn of(snapshot: &Snapshot) -> Named {
        let mut named = Named::default();
        for build in &snapshot.machine_os_builds {
            if let Some((repo, tag)) = build.push_spec().and_then(repo_tag) {
                named
                    .build_tags
                    .entry((repo, tag))
                    .or_insert_with(|| build.name().to_string());
            }
            for spec in [build.digested_image(), build.push_spec()]
                .into_iter()
                .flatten()
            {
                for digest in digests_in(spec) {
                    named
                        .build_digests
                        .entry(digest)
                        .or_insert_with(|| build.name().to_string());
                }
            }
        }
        // Nodes share interned strings: each distinct image is read once.
        let mut digests_of: HashMap<&str, Vec<String>> = HashMap::new();
        for node in &snapshot.nodes {
            let uses = [
                (node.current_image(), Need::Running),
                (node.desired_image(), Need::Pending),
            ];
            for (image, how) in uses {
                let Some(image) = image else { continue };
                let how = if how == Need::Pending && node.current_image() == Some(image) {
                    Need::Running
                } else {
                    how
                };
                let digests = digests_of.entry(image).or_insert_with(|| digests_in(image));
                for digest in digests.iter() {
                    let nodes = named.node_digests.entry(digest.clone()).or_default();
                    let entry = nodes.entry(node.name().to_string()).or_insert(how);
                    *entry = (*entry).max(how);
                }
            }
        }
        for config in &snapshot.machine_os_configs {
            let mut seen: HashSet<String> = HashSet::new();
            let texts = config
                .current_image()
                .into_iter()
                .chain(config.push_spec())
                .chain(config.annotation_values());
            for text in texts {
                for digest in digests_in(text) {
                    if seen.insert(digest.clone()) {
                        named
                            .config_digests
                            .entry(digest)
                            .or_default()
                            .push(config.name().to_string());
                    }
                }
            }
            if let Some(key) = config.push_spec().and_then(repo_tag) {
                named
                    .config_tags
                    .entry(key)
                    .or_default()
                    .push(config.name().to_string());
            }
        }
        named
    }
}

/// The repository and tag of a tagged pull spec (none for a digest-only spec).
fn repo_tag(spec: &str) -> Option<(RepoKey, String)> {
    let key = ImageKey::parse(spec);
    let tag = key.tag()?.to_string();
    Some((key.repo()?.clone(), tag))
}
