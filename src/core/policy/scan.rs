//! The node rule: a node blocks while its desired image is one the deletion removes (registry
//! identity, [`crate::core::image`]) and it has not reached it (MCO's exact string equality of
//! `currentImage` and `desiredImage`, `isNodeImageDone`), whatever pool it is in. A change to
//! what this rule reads must change [`super::index`]'s filing and
//! [`crate::core::node::ImageAnnotations`] (which decodes only these annotations) too.

use crate::core::node::NodeImages;
use crate::core::snapshot::Snapshot;

use super::images::GuardedImages;
use super::memo::{Memo, Text};
use super::pools::Membership;
use super::verdict::{BlockReason, BlockingNode, GuardedImage, PolicyMode};

pub(super) fn blocking_nodes(
    snapshot: &Snapshot,
    guarded: &GuardedImages,
    mode: PolicyMode,
    members: &Membership<'_>,
) -> Vec<BlockingNode> {
    if guarded.is_empty() {
        return Vec::new();
    }
    let digests: Option<Vec<String>> = guarded.digests();
    let mut memo = Memo::default();
    let mut blocking = Vec::new();
    for node in &snapshot.nodes {
        let images = NodeImages::of(node);
        let key = (Text(images.desired), Text(images.current));
        let hit = memo.get_or(key, || classify(images, guarded, digests.as_deref(), mode));
        if let Some((image, reason)) = hit {
            blocking.push(BlockingNode {
                node: node.name().to_string(),
                pool: members.primary(node.as_ref()).map(str::to_string),
                current_image: images.current.map(str::to_string),
                desired_image: images.desired.map(str::to_string),
                state: images.state.map(str::to_string),
                image: image.image,
                machine_os_build: image.machine_os_build,
                reason,
            });
        }
    }
    blocking.sort_by(|a, b| a.node.cmp(&b.node));
    blocking
}

/// Whether a node with these images blocks, and on which guarded image. `digests`, the guarded
/// images' lower-case digest hex (`None` when one has none: tag-only or unparseable), is a cheap
/// test run before full parsing, so a decision over 50,000 nodes parses only the few pull specs
/// that can match; it never rejects a spec the full comparison accepts ([`ends_with_digest`]).
fn classify(
    images: NodeImages<'_>,
    guarded: &GuardedImages,
    digests: Option<&[String]>,
    mode: PolicyMode,
) -> Option<(GuardedImage, BlockReason)> {
    let find = |spec: &str| {
        digests
            .is_none_or(|hexes| hexes.iter().any(|hex| ends_with_digest(spec, hex)))
            .then(|| guarded.find(spec))
            .flatten()
    };
    let in_flight = images
        .desired
        .filter(|_| !images.reached())
        .and_then(find)
        .map(|hit| (hit.clone(), BlockReason::InFlight));
    in_flight.or_else(|| match mode {
        PolicyMode::InUse => images
            .current
            .and_then(find)
            .map(|hit| (hit.clone(), BlockReason::InUse)),
        PolicyMode::InFlight => None,
    })
}

/// Whether `spec` ends with the digest hex `hex`, in any case: a digest is always the last
/// part of a reference, so no spelling of an image with that digest fails this.
fn ends_with_digest(spec: &str, hex: &str) -> bool {
    let spec = spec.trim_end().as_bytes();
    spec.len() >= hex.len() && spec[spec.len() - hex.len()..].eq_ignore_ascii_case(hex.as_bytes())
}
