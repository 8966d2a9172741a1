//! The deletion policy: a pure function from a snapshot to a verdict with reasons
//! ([`evaluate`]); docs/policy.md states every rule. By default (`in-flight`) only a node that
//! has yet to pull an image the deletion removes blocks: one already running it needs no registry.
//!
//! One file per rule family: `images` (what a deletion removes), `scan` (the node rule), `pools`
//! (membership and the pool rule), `joining` (the joining-machine rule); `verdict` is what they
//! come to and `decide` puts them together. `index` and `memo` are the scans' fast paths.

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
