//! What a decision is about and what it comes to: the deletion, the policy mode, and the
//! verdict with every reason (nodes, pools, joining machines) the words are made from. Shared
//! by the rule families beside this file and by every front end.

use std::fmt;

use serde::Serialize;

use crate::core::model::{MachineOSBuild, MachineOSConfig};
use crate::core::release::Rules;

/// Pending nodes a [`RollingPool`] names (the rest are counted).
pub const NAMED_NEXT_NODES: usize = 5;

/// How strictly "a node still needs the image" is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// Block while a node's desired image is one of the images and not yet reached.
    #[default]
    InFlight,
    /// Also block while a node runs one of the images (a settled pool then can never
    /// leave image mode without the override).
    InUse,
}

impl fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyMode::InFlight => "in-flight",
            PolicyMode::InUse => "in-use",
        })
    }
}

/// Kinds of object the guard protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TargetKind {
    MachineOSConfig,
    MachineOSBuild,
}

impl TargetKind {
    /// Lower-case kind as `oc` spells it in commands.
    pub fn cli_name(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfig",
            TargetKind::MachineOSBuild => "machineosbuild",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "MachineOSConfig",
            TargetKind::MachineOSBuild => "MachineOSBuild",
        }
    }

    /// Bounded label value for metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            TargetKind::MachineOSConfig => "machineosconfigs",
            TargetKind::MachineOSBuild => "machineosbuilds",
        }
    }
}

/// The object whose deletion is being decided.
#[derive(Clone, Copy, Debug)]
pub enum Deletion<'a> {
    MachineOSConfig(&'a MachineOSConfig),
    MachineOSBuild(&'a MachineOSBuild),
}

/// An image the deletion would remove from the registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardedImage {
    pub image: String,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
}

/// Why a node blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockReason {
    /// Desired image is one of the guarded images and the node has not reached it.
    InFlight,
    /// The node runs one of the guarded images (`in-use` mode only).
    InUse,
}

/// A node that still needs one of the guarded images.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingNode {
    pub node: String,
    pub pool: Option<String>,
    pub current_image: Option<String>,
    pub desired_image: Option<String>,
    pub state: Option<String>,
    /// The guarded image this node matched.
    pub image: String,
    /// The build that produced it, when known.
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
    #[serde(skip)]
    pub reason: BlockReason,
}

/// A pool MCO has not finished rolling out to one of the guarded images: not paused, its
/// MachineOSConfig's current image is guarded, the build for its rendered config has not failed,
/// and a node MCO places in it does not run that image yet (as an exact string).
/// MCO sends those nodes to the image one after another; between two of them (or before the
/// first, while the pool's status still reads `Updated`) no node may need the image at that
/// instant, but deleting it then degrades the pool just the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingPool {
    pub pool: String,
    /// The guarded image the pool is rolling out (its MachineOSConfig's current image).
    pub image: String,
    /// Nodes of the pool that do not run the image yet, counted from the nodes themselves;
    /// `None` when the verdict was decided from the index's candidates (see
    /// [`evaluate_blocked`]), where at least one of them is known not to.
    pub pending_nodes: Option<usize>,
    /// The first [`NAMED_NEXT_NODES`] of those nodes by name: the nodes MCO updates next.
    pub next_nodes: Vec<String>,
    /// The pool's own progress report (`status.updatedMachineCount`, `status.machineCount`),
    /// which lags the nodes.
    pub updated_machines: Option<i64>,
    pub machines: Option<i64>,
}

/// A machine that is joining the cluster (Provisioning or Provisioned, no Node yet) and whose
/// first boot would pull one of the guarded images from the Machine Config Server's Ignition
/// (4.21 and later; see `joining`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoiningMachine {
    /// `namespace/name`.
    pub machine: String,
    pub phase: String,
    pub machine_set: Option<String>,
    /// The pool whose image it would pull.
    pub pool: String,
    /// False when its user-data secret names no pool, so it counts for every pool.
    pub pool_known: bool,
    pub image: String,
    #[serde(rename = "machineOSBuild")]
    pub machine_os_build: Option<String>,
}

/// The decision, with everything needed to explain it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub kind: TargetKind,
    pub name: String,
    pub mode: PolicyMode,
    pub allowed: bool,
    /// Set when the override annotation let a blocked deletion through.
    pub override_reason: Option<String>,
    pub images: Vec<GuardedImage>,
    /// Sorted by node name.
    pub blocking: Vec<BlockingNode>,
    /// Pools not done rolling out one of the images, sorted by name.
    pub rolling: Vec<RollingPool>,
    /// Joining machines that would pull one of the images, sorted by namespace/name.
    pub joining: Vec<JoiningMachine>,
    /// The release rules the verdict was decided with.
    pub rules: Rules,
}

impl Verdict {
    /// Whether anything blocks the deletion (the override aside).
    pub fn blocked(&self) -> bool {
        !self.blocking.is_empty() || !self.rolling.is_empty() || !self.joining.is_empty()
    }

    pub fn overridden(&self) -> bool {
        self.override_reason.is_some() && self.blocked()
    }

    /// The first reason it refuses (the deletion-blocked gauge's `reason`).
    pub fn blocked_by(&self) -> Blocked {
        if self.allowed {
            Blocked::No
        } else if !self.blocking.is_empty() {
            Blocked::Node
        } else if !self.rolling.is_empty() {
            Blocked::Pool
        } else {
            Blocked::Machine
        }
    }
}

/// Why deleting an object now would be refused: the first reason of its verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// A node still needs one of its images.
    Node,
    /// A pool is still rolling one out.
    Pool,
    /// A joining machine would pull one at first boot.
    Machine,
    /// Nothing: deleting it now is allowed.
    No,
}

impl Blocked {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Blocked::Node => "node",
            Blocked::Pool => "pool",
            Blocked::Machine => "machine",
            Blocked::No => "none",
        }
    }
}
