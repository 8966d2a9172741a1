//! The deletion policy: a pure function from a snapshot to a verdict with reasons.
//!
//! The danger (see docs/design.md) is a node that still has to pull an image built from
//! the object being deleted: MCO 4.20 deletes those images from the registry as soon as
//! the MachineOSConfig is gone, and the node then degrades with "manifest unknown".
//! A node that already *runs* the image does not need the registry any more, so by
//! default (`in-flight`) only nodes whose desired image is not yet reached block.
//!
//! One file per rule family: `images` (what a deletion removes), `scan` (the node rule),
//! `pools` (membership and the pool rule), `joining` (the joining-machine rule); `verdict`
//! is what they come to, and `decide` puts the rules together ([`evaluate`]). `index` is the
//! node rule's fast path (an index of nodes by digest, and the decision over its candidates);
//! `memo` memoises the scans over every node.

mod decide;
mod images;
mod index;
mod joining;
mod memo;
mod pools;
mod scan;
mod verdict;

pub use decide::evaluate;
pub use images::deleted_with;
pub use index::{NodeIndex, blocking_digests, evaluate_blocked, evaluate_indexed, guarded_digests};
pub use pools::{Membership, membership_labels};
pub use verdict::{
    BlockReason, Blocked, BlockingNode, Deletion, GuardedImage, JoiningMachine, NAMED_NEXT_NODES,
    PolicyMode, RollingPool, TargetKind, Verdict,
};

#[cfg(test)]
mod tests;
