//! The label sets of the metrics, each a fixed set of values (a domain enum's `label()` or a
//! fixed string; pool and config names are bounded by the cluster's objects), and the phases
//! and steps a confirmed decision is timed by.

use prometheus_client::encoding::EncodeLabelSet;

/// A family's one label, its name and value (`("result", "confirmed")`).
pub(super) type Label = [(&'static str, &'static str); 1];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DecisionLabels {
    pub(super) resource: &'static str,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BlockedLabels {
    pub(super) machineosconfig: String,
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReleaseRowLabels {
    /// A row of `core::release` (`4.19` ... or `unknown`): a fixed set.
    pub(super) release: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PoolLabels {
    /// A MachineConfigPool's name: as many as the cluster has pools.
    pub(super) pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct NeededImageLabels {
    /// A MachineConfigPool's name.
    pub(super) pool: String,
    /// `pending` (a node is about to pull it) or `running`.
    pub(super) need: &'static str,
    /// `missing` or `unknown`.
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ConfigLabels {
    /// A MachineOSConfig's name (empty for builds that name none): bounded by the pools.
    pub(super) machineosconfig: String,
}

/// The phases of a decision the engine confirms, in order.
#[derive(Clone, Copy, Debug)]
pub enum DecisionPhase {
    /// The verdict from the caches (or waiting for a concurrent request's).
    Cached,
    /// From there until the confirming read the request uses started: the batch window, a
    /// turn (the cap on reads at once); zero when that read had started already.
    Wait,
    /// From then to the confirming read's result: the API server, the node fence.
    Read,
    /// The verdict on the read (or waiting for a concurrent request's on the same read).
    Fresh,
}

impl DecisionPhase {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Cached => "cached",
            Self::Wait => "wait",
            Self::Read => "read",
            Self::Fresh => "fresh",
        }
    }
}

/// The steps of a confirming read, each timed from the read's start but `CatchUp`.
#[derive(Clone, Copy, Debug)]
pub enum ReadStep {
    /// The consistent lists of MachineOSConfigs, MachineOSBuilds, pools, Machines and the
    /// ClusterVersion.
    Lists,
    /// The node collection's revision (the fence).
    Revision,
    /// From the revision's arrival to the node cache applying it.
    CatchUp,
    /// A list of every node, when the cache was late.
    NodeList,
}

impl ReadStep {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Lists => "lists",
            Self::Revision => "revision",
            Self::CatchUp => "catch_up",
            Self::NodeList => "node_list",
        }
    }
}
