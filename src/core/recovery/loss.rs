//! Whether the image a stuck node waits for is really lost (rule 3b of [`super::rules`]), from
//! what its registry said, asked as the node pulls it (an input the CLI gathers). No build
//! carrying it says MCO cannot serve it, not that the registry lost it: if the registry still
//! serves it the daemon's retry can succeed, and a cancel landing during that retry makes the
//! node worse (it reboots into the image, then is drained back). So only **missing** qualifies;
//! **unknown** or not asked is for a person unless the loss is verified ([`WhenUnverified`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::core::policy::Membership;
use crate::core::registry::{Answer, Status};

use super::RecoverySnapshot;
use super::node::RecoveryNode;
use super::stuck::lost_image;

/// What the registry said of the images stuck nodes wait for, and what an answer it could not
/// give comes to.
#[derive(Clone, Debug, Default)]
pub struct RegistryAnswers {
    /// The answer per image (the pull spec as the node's `desiredImage` names it).
    pub answers: BTreeMap<String, Answer>,
    /// Why an image not in `answers` was not asked (no registry access).
    pub not_asked: String,
    pub unverified: WhenUnverified,
}

/// What a stuck node whose image the registry could not tell about (unknown, or not asked)
/// comes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenUnverified {
    /// A person decides: `imageLossUnverified` (a live plan, by default).
    #[default]
    Ask,
    /// `--image-loss-verified`: the admin verified the loss; recoverable, and the plan says the
    /// registry did not verify it.
    AdminVerified,
    /// A plan from a dump, which is never applied (`--apply` reads the live cluster and asks the
    /// registry again right before each patch): recoverable as the other rules decide, and the
    /// plan says the loss was not verified.
    Preview,
}

/// What the registry said of one node's image: its status (`None`: not asked) and why, in
/// words that hold no credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegistrySaid {
    pub status: Option<Status>,
    pub why: String,
}

impl RegistrySaid {
    /// The status as a word (`not asked` when it was not).
    pub fn label(&self) -> &'static str {
        self.status.map_or("not asked", Status::label)
    }
}

/// How the loss of a recoverable node's image is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loss {
    /// The registry says the image is missing.
    Verified(RegistrySaid),
    /// The registry could not tell (or was not asked); the admin says the loss is verified.
    AdminVerified(RegistrySaid),
    /// The registry could not tell (or was not asked), in a plan from a dump.
    Unverified(RegistrySaid),
}

impl Loss {
    pub fn said(&self) -> &RegistrySaid {
        match self {
            Loss::Verified(s) | Loss::AdminVerified(s) | Loss::Unverified(s) => s,
        }
    }
}

/// What rule 3b makes of the registry's word on a node's image.
pub(super) enum Judged {
    /// The registry still serves it: do not cancel.
    Available(RegistrySaid),
    /// Lost as far as the plan may act on it.
    Lost(Loss),
    /// A person decides (unknown, or not asked, with [`WhenUnverified::Ask`]).
    Unverified(RegistrySaid),
}

impl RegistryAnswers {
    /// What the registry said of `image`.
    pub fn said(&self, image: &str) -> RegistrySaid {
        let answer = self.answers.get(image);
        RegistrySaid {
            status: answer.map(|a| a.status),
            why: answer.map_or_else(|| self.not_asked.clone(), |a| a.why.clone()),
        }
    }

    pub(super) fn judge(&self, image: &str) -> Judged {
        let said = self.said(image);
        match (said.status, self.unverified) {
            (Some(Status::Available), _) => Judged::Available(said),
            (Some(Status::Missing), _) => Judged::Lost(Loss::Verified(said)),
            (_, WhenUnverified::Ask) => Judged::Unverified(said),
            (_, WhenUnverified::AdminVerified) => Judged::Lost(Loss::AdminVerified(said)),
            (_, WhenUnverified::Preview) => Judged::Lost(Loss::Unverified(said)),
        }
    }
}

/// The images to ask the registry about: the `desiredImage` of every node (of `pool` only, when
/// given) MCO places in a pool that is `Degraded` on an image no MachineOSBuild carries (what
/// rule 3b reads; nobody else's).
pub fn images_to_ask(snapshot: &RecoverySnapshot, pool: Option<&str>) -> BTreeSet<String> {
    let members = Membership::new(&snapshot.objects.pools);
    snapshot
        .nodes
        .iter()
        .filter(|node| {
            let node_pool = members.primary(*node);
            node_pool.is_some_and(|p| pool.is_none_or(|want| p == want))
        })
        .filter_map(|node| lost(node, snapshot))
        .map(str::to_string)
        .collect()
}

/// The image `node` is stuck on ([`lost_image`]), if it is.
pub(super) fn lost<'n>(node: &'n RecoveryNode, snapshot: &RecoverySnapshot) -> Option<&'n str> {
    lost_image(node.images(), &snapshot.objects.machine_os_builds)
}
