//! "Stuck on a lost image", the one definition the plan, `check --all` and `serve`'s gauge
//! share: a node `Degraded` whose `desiredImage` differs from its `currentImage` (as MCO's
//! daemon compares them: exact strings) while no MachineOSBuild carries that image as its
//! `status.digestedImagePushSpec`. No MCO object can rebuild or serve it then, and MCO never
//! retargets the node by itself.
//!
//! "Carries" is registry identity ([`crate::core::image::same_image`]): a build that carries the
//! image spelled differently still counts, so a node is called stuck only when it surely is.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::core::image::same_image;
use crate::core::model::MachineOSBuild;
use crate::core::node::NodeImages;
use crate::core::policy::Membership;
use crate::core::snapshot::Snapshot;

/// The first build (by the order given) whose digested image is `image` by registry identity.
pub fn carrier<'b>(image: &str, builds: &'b [Arc<MachineOSBuild>]) -> Option<&'b MachineOSBuild> {
    builds
        .iter()
        .map(Arc::as_ref)
        .find(|b| b.digested_image().is_some_and(|d| same_image(d, image)))
}

/// The image a node waits for and cannot get: `desired` when the node is `Degraded`, has not
/// reached it, and no build carries it.
pub fn lost_image<'a>(images: NodeImages<'a>, builds: &[Arc<MachineOSBuild>]) -> Option<&'a str> {
    let desired = images.desired?;
    (images.state == Some("Degraded")
        && images.current != Some(desired)
        && carrier(desired, builds).is_none())
    .then_some(desired)
}

/// A node stuck on a lost image, as `check --all` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    pub node: String,
    /// Its pool as MCO places it (`None`: in no pool).
    pub pool: Option<String>,
    pub image: String,
}

/// Every node of `snapshot` stuck on a lost image, in the snapshot's order.
pub fn stuck_nodes(snapshot: &Snapshot) -> Vec<Stuck> {
    let members = Membership::new(&snapshot.pools);
    snapshot
        .nodes
        .iter()
        .filter_map(|node| {
            let image = lost_image(NodeImages::of(node), &snapshot.machine_os_builds)?;
            Some(Stuck {
                node: node.name().to_string(),
                pool: members.primary(node.as_ref()).map(str::to_string),
                image: image.to_string(),
            })
        })
        .collect()
}

/// Nodes stuck on a lost image, per pool (every pool of the snapshot, 0 for most), for
/// `serve`'s gauge. `snapshot.nodes` may be only the nodes that have not reached their desired
/// image (the node index's in-flight set): the others cannot be stuck. Nodes MCO places in no
/// pool are not counted (MCO manages none of them).
pub fn stuck_per_pool(snapshot: &Snapshot) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = snapshot
        .pools
        .iter()
        .map(|p| (p.name().to_string(), 0))
        .collect();
    for stuck in stuck_nodes(snapshot) {
        if let Some(n) = stuck.pool.and_then(|p| counts.get_mut(&p)) {
            *n += 1;
        }
    }
    counts
}
