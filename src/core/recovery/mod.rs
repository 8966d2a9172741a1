//! Recovery's functional core: from a snapshot to a plan that says, for every node the lost-image
//! bug left behind, whether cancelling its failed target is safe (and the exact patch), what a
//! person must do first, or why it is not this tool's. Cancelling (`desiredImage` back to
//! `currentImage` or removed, `desiredConfig` back to `currentConfig`) makes the daemon find
//! nothing to change: it uncordons and reports `Done` without a reboot (docs/runbooks.md, "A pool
//! already degraded"). No I/O: what the registry says of each image is an input ([`loss`]).

pub mod loss;
pub mod marker;
pub mod node;
pub mod patch;
pub mod pool;
pub mod progress;
pub mod report;
mod rules;
pub mod stuck;
pub mod words;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use crate::core::policy::Membership;
use crate::core::snapshot::Snapshot;

pub use loss::{Loss, RegistryAnswers, RegistrySaid, WhenUnverified, images_to_ask};
pub use marker::Marker;
pub use node::MARKER;
pub use node::RecoveryNode;
pub use patch::NodePatch;
pub use progress::{Progress, progress};
pub use rules::{Drain, PoolConfig, Problem, Scope};

/// What a recovery plan reads.
#[derive(Clone, Debug, Default)]
pub struct RecoverySnapshot {
    /// MachineOSConfigs, MachineOSBuilds and pools (its lean `nodes` are not read).
    pub objects: Snapshot,
    /// Every node, as recovery reads it.
    pub nodes: Vec<RecoveryNode>,
    /// The names of the MachineConfigs (`machineconfigs.machineconfiguration.openshift.io`);
    /// `None` when the source does not show them (a dump without them).
    pub machine_configs: Option<BTreeSet<String>>,
    /// Nodes whose copies in a dump disagree with nothing to choose between them.
    pub disagreeing: BTreeSet<String>,
}

/// The plan: one entry per node the tool has something to say about, by pool then name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub nodes: Vec<NodePlan>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodePlan {
    pub node: String,
    /// The node's pool as MCO places it (`None`: in no pool).
    pub pool: Option<String>,
    pub diagnosis: Diagnosis,
    /// What the registry said of the image the node is stuck on (`None` when the plan had no
    /// question for it: not stuck on an image no build carries, or not a node to patch).
    pub registry: Option<RegistrySaid>,
}

/// What to do with one node.
#[derive(Clone, Debug, PartialEq)]
pub enum Diagnosis {
    /// Stuck on a lost image, and cancelling its target is safe: the patch does it.
    Recoverable(Box<Recovery>),
    /// Cancelled by an earlier run (its marker matches); its daemon has not finished the no-op
    /// update yet. Nothing to patch again: wait for it.
    Cancelled {
        marker: Marker,
        waiting: Vec<String>,
    },
    /// Stuck on a lost image, but something must be done by a person first (or it is not lost).
    NeedsAttention(Vec<Problem>),
    /// Degraded or failing for a reason this tool does not handle; nothing is patched.
    OutOfScope(Scope),
}

/// A recoverable node: why it qualifies and the patch that cancels its target.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    /// The `desiredImage` no build carries.
    pub image: String,
    /// How its loss is known (the registry's word, or the admin's).
    pub loss: Loss,
    pub current_image: Option<String>,
    pub desired_config: String,
    pub current_config: String,
    pub drain: Drain,
    /// A MachineOSConfig that targets the node's pool, if any, and why it sends no image.
    pub pool_config: PoolConfig,
    /// What the patch records in the marker (MCO's annotations as read, the boot ID).
    pub marker: Marker,
    pub patch: NodePatch,
}

impl Plan {
    pub fn recoverable(&self) -> impl Iterator<Item = (&NodePlan, &Recovery)> {
        self.nodes.iter().filter_map(|n| match &n.diagnosis {
            Diagnosis::Recoverable(r) => Some((n, r.as_ref())),
            _ => None,
        })
    }
}

/// Plans the recovery of every node (of `pool` only, when given), with what the registry said
/// of the images asked ([`images_to_ask`]).
pub fn plan(snapshot: &RecoverySnapshot, pool: Option<&str>, registry: &RegistryAnswers) -> Plan {
    let members = Membership::new(&snapshot.objects.pools);
    let mut nodes: Vec<NodePlan> = snapshot
        .nodes
        .iter()
        .filter_map(|node| {
            let node_pool = members.primary(node);
            let asked = pool.is_none() || node_pool == pool;
            asked
                .then(|| node_plan(snapshot, node, node_pool, registry))
                .flatten()
        })
        .collect();
    nodes.sort_by(|a, b| (&a.pool, &a.node).cmp(&(&b.pool, &b.node)));
    Plan { nodes }
}

/// Plans one node from a fresh read (`--apply` re-plans each node right before its patch, with
/// the registry asked again); `None` when the node is not in the snapshot or there is nothing
/// to say about it.
pub fn plan_node(
    snapshot: &RecoverySnapshot,
    name: &str,
    registry: &RegistryAnswers,
) -> Option<NodePlan> {
    let node = snapshot.nodes.iter().find(|n| n.name == name)?;
    let members = Membership::new(&snapshot.objects.pools);
    node_plan(snapshot, node, members.primary(node), registry)
}

fn node_plan(
    snapshot: &RecoverySnapshot,
    node: &RecoveryNode,
    pool: Option<&str>,
    registry: &RegistryAnswers,
) -> Option<NodePlan> {
    let diagnosis = rules::diagnose(snapshot, node, pool, registry)?;
    let registry = match diagnosis {
        Diagnosis::Recoverable(_) | Diagnosis::NeedsAttention(_) => loss::lost(node, snapshot),
        _ => None,
    }
    .map(|image| registry.said(image));
    Some(NodePlan {
        node: node.name.clone(),
        pool: pool.map(str::to_string),
        diagnosis,
        registry,
    })
}

/// The most cautious plan over several readings of the same source (a dump whose copies of an
/// object disagree): a node is recoverable only when every reading makes it recoverable with
/// the same patch; a reading that needs a person decides; readings that otherwise differ need a
/// person too, since the copies cannot tell which is true.
pub fn most_cautious(plans: impl IntoIterator<Item = Plan>) -> Plan {
    let mut plans = plans.into_iter();
    let Some(mut merged) = plans.next() else {
        return Plan::default();
    };
    for other in plans {
        let mut unseen: BTreeSet<String> = merged.nodes.iter().map(|n| n.node.clone()).collect();
        for theirs in other.nodes {
            unseen.remove(&theirs.node);
            match merged.nodes.iter_mut().find(|n| n.node == theirs.node) {
                Some(ours) if *ours == theirs => {}
                Some(ours) => ours.diagnosis = cautious(&ours.diagnosis, Some(theirs.diagnosis)),
                None => {
                    let diagnosis = cautious(&theirs.diagnosis, None);
                    merged.nodes.push(NodePlan {
                        diagnosis,
                        ..theirs
                    });
                }
            }
        }
        for ours in merged.nodes.iter_mut().filter(|n| unseen.contains(&n.node)) {
            ours.diagnosis = cautious(&ours.diagnosis, None);
        }
    }
    merged
        .nodes
        .sort_by(|a, b| (&a.pool, &a.node).cmp(&(&b.pool, &b.node)));
    merged
}

/// Of two readings of a node that differ (`None`: the other reading has nothing to say about
/// it), the one to keep: a reading that needs a person, else "the copies disagree".
fn cautious(ours: &Diagnosis, theirs: Option<Diagnosis>) -> Diagnosis {
    match (ours, theirs) {
        (Diagnosis::NeedsAttention(_), _) => ours.clone(),
        (_, Some(Diagnosis::NeedsAttention(p))) => Diagnosis::NeedsAttention(p),
        _ => Diagnosis::NeedsAttention(vec![Problem::CopiesDisagree]),
    }
}
