//! Which images the cluster needs from its registries, and who needs each.
//!
//! - A node's `desiredImage` it has not reached (`currentImage` is another string): its daemon
//!   is about to pull it (**pending**).
//! - A node's `currentImage`: it runs it; a node rebases to it again only when its on-disk
//!   state is reset, so a lost one fails later, not now (**running**).
//! - A MachineOSConfig's `status.currentImagePullSpec`: MCO sends every node of its pool that
//!   is not on it there, and (4.21 on) joining machines pull it at first boot; pending while a
//!   node of the pool is not on it, else running.
//! - Each succeeded MachineOSBuild's `status.digestedImagePushSpec`: a rollback to its config
//!   reuses it. Listed, but needed by nobody until then.
//!
//! Images are the exact strings MCO wrote (a node pulls exactly that string, mirrors applied);
//! two spellings of one digest are two entries, each asked. Pools are MCO's
//! ([`crate::core::policy::Membership`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::core::model::trimmed;
use crate::core::node::NodeImages;
use crate::core::policy::Membership;
use crate::core::snapshot::Snapshot;

/// How urgently a pool needs an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Need {
    /// Nodes run it: a loss fails them only if they ever pull it again.
    Running,
    /// A node is about to pull it (or MCO will send one there): a loss fails that node.
    Pending,
}

impl Need {
    pub fn label(self) -> &'static str {
        match self {
            Need::Pending => "pending",
            Need::Running => "running",
        }
    }
}

/// Who needs an image.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Holder {
    Node {
        node: Arc<str>,
        pool: Option<Arc<str>>,
        need: Need,
    },
    /// The config's current image.
    MachineOSConfig {
        name: String,
        pool: String,
        need: Need,
    },
    /// A succeeded build's image.
    MachineOSBuild { name: String },
}

/// One image and who needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeededImage {
    pub image: String,
    pub needed_by: Vec<Holder>,
}

impl NeededImage {
    /// Whether a node or a MachineOSConfig needs it (what `images`' exit status and `serve`'s
    /// audit count); a build's image alone does not.
    pub fn counts(&self) -> bool {
        self.needed_by
            .iter()
            .any(|h| !matches!(h, Holder::MachineOSBuild { .. }))
    }

    /// The most urgent need of each pool.
    pub fn pools(&self) -> BTreeMap<&str, Need> {
        let mut pools: BTreeMap<&str, Need> = BTreeMap::new();
        for holder in &self.needed_by {
            let (pool, need) = match holder {
                Holder::Node {
                    pool: Some(pool),
                    need,
                    ..
                } => (pool.as_ref(), *need),
                Holder::MachineOSConfig { pool, need, .. } => (pool.as_str(), *need),
                _ => continue,
            };
            let entry = pools.entry(pool).or_insert(need);
            *entry = (*entry).max(need);
        }
        pools
    }

    /// The most urgent need of anyone.
    pub fn need(&self) -> Option<Need> {
        self.needed_by
            .iter()
            .filter_map(|h| match h {
                Holder::Node { need, .. } | Holder::MachineOSConfig { need, .. } => Some(*need),
                Holder::MachineOSBuild { .. } => None,
            })
            .max()
    }
}

/// Every image of the snapshot and who needs it, sorted by image.
pub fn needed_images(snapshot: &Snapshot) -> Vec<NeededImage> {
    let membership = Membership::new(&snapshot.pools);
    let mut pool_names: HashMap<&str, Arc<str>> = HashMap::new();
    let mut images: BTreeMap<String, Vec<Holder>> = BTreeMap::new();
    let mut add = |image: &str, holder| images.entry(image.to_string()).or_default().push(holder);
    // Per pool: how many member nodes run each current image, and how many nodes there are.
    let mut running: HashMap<(&str, &str), usize> = HashMap::new();
    let mut members: HashMap<&str, usize> = HashMap::new();
    for node in &snapshot.nodes {
        let pool = membership.primary(node.as_ref());
        let shared_pool = pool.map(|p| Arc::clone(pool_names.entry(p).or_insert_with(|| p.into())));
        let seen = NodeImages::of(node);
        if let Some(p) = pool {
            *members.entry(p).or_default() += 1;
            if let Some(current) = seen.current {
                *running.entry((p, current)).or_default() += 1;
            }
        }
        let pending = seen.desired.filter(|_| !seen.reached());
        for (image, need) in [(pending, Need::Pending), (seen.current, Need::Running)] {
            if let Some(image) = image {
                let node = Arc::clone(node.shared_name());
                let pool = shared_pool.clone();
                add(image, Holder::Node { node, pool, need });
            }
        }
    }
    for mosc in &snapshot.machine_os_configs {
        let Some(image) = trimmed(mosc.current_image()) else {
            continue;
        };
        let pool = mosc.pool_name();
        let on_it = running.get(&(pool, image)).copied().unwrap_or_default();
        let need = if on_it < members.get(pool).copied().unwrap_or_default() {
            Need::Pending
        } else {
            Need::Running
        };
        let name = mosc.name().to_string();
        let pool = pool.to_string();
        add(image, Holder::MachineOSConfig { name, pool, need });
    }
    for build in snapshot.machine_os_builds.iter().filter(|b| b.succeeded()) {
        // `digested_image` is trimmed and never empty.
        if let Some(image) = build.digested_image() {
            let name = build.name().to_string();
            add(image, Holder::MachineOSBuild { name });
        }
    }
    images
        .into_iter()
        .map(|(image, needed_by)| NeededImage { image, needed_by })
        .collect()
}

/// Every image any of `snapshots` needs, with each holder once: a dump whose copies of an object
/// disagree is read as each combination of them ([`crate::access::dump::Loaded::snapshots`]), and
/// an image one combination needs is asked about like any other.
pub fn needed_images_of_all<'a>(
    snapshots: impl IntoIterator<Item = &'a Snapshot>,
) -> Vec<NeededImage> {
    let mut images: BTreeMap<String, (Vec<Holder>, HashSet<Holder>)> = BTreeMap::new();
    for snapshot in snapshots {
        for needed in needed_images(snapshot) {
            let (holders, seen) = images.entry(needed.image).or_default();
            for holder in needed.needed_by {
                if seen.insert(holder.clone()) {
                    holders.push(holder);
                }
            }
        }
    }
    images
        .into_iter()
        .map(|(image, (needed_by, _))| NeededImage { image, needed_by })
        .collect()
}

#[cfg(test)]
mod tests;
