//! Which nodes qualify for the cancel, decided from the objects (never from the `reason` text,
//! which differs by z-stream), and what a person must do first where one does not. A node
//! qualifies when:
//! 1. its `state` is `Degraded`;
//! 2. its `desiredImage` is present and differs from its `currentImage`;
//! 3. no MachineOSBuild carries that image ([`super::stuck`]): trouble with an image MCO still has
//!    is the daemon's to retry; 3b. its registry says **missing** ([`super::loss`]);
//! 4. it is drained as the daemon leaves a failed update (`desiredDrain` = `lastAppliedDrain` =
//!    `drain-<desiredConfig>`, cordoned), unless single-node (`SingleReplica`: no drain);
//! 5. the rendered config its `currentConfig` names exists (after the cancel the daemon reads
//!    only that one; the old `desiredConfig` is never read again);
//! 6. no MachineOSConfig sends its pool's nodes an image (`canLayeredContinue`) unless the pool is
//!    paused: the node controller would send the node straight back to the lost image;
//! 7. the source shows one version of it (a dump's disagreeing copies cannot be trusted).

use crate::core::model::node_annotations::{CURRENT_CONFIG, DESIRED_CONFIG};
use crate::core::node_controller::{self, PoolBuild, can_layered_continue, pool_build};

use super::loss::{Judged, Loss, RegistryAnswers, RegistrySaid};
use super::marker::Marker;
use super::node::RecoveryNode;
use super::patch::NodePatch;
use super::progress::{Progress, cancel_holds, progress};
use super::stuck::carrier;
use super::{Diagnosis, Recovery, RecoverySnapshot};

/// How the drain rule was met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drain {
    /// `desiredDrain` = `lastAppliedDrain` = this value, and the node is cordoned.
    Drained(String),
    /// Single-node (`controlPlaneTopology=SingleReplica`): the daemon does not drain.
    SingleNode,
}

/// Why a node stuck on a lost image (or one that looks like it) is not patched: each says what
/// to do instead (see [`super::words`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A build still carries the image: the pull failed for another reason (registry, its
    /// credentials); the daemon retries by itself.
    ImageCarried { image: String, build: String },
    /// The registry still serves the image, asked as the node pulls it: the daemon's retry can
    /// still succeed, and a cancel landing during one that does makes the node worse.
    ImageStillServed { image: String, said: RegistrySaid },
    /// The registry could not tell whether the image is gone (or was not asked), and nobody
    /// said the loss is verified.
    ImageLossUnverified { image: String, said: RegistrySaid },
    /// A MachineOSConfig sends the pool's nodes an image (`canLayeredContinue`) and the pool is
    /// not paused.
    PoolTargeted { pool: String, config: String },
    /// `lastAppliedDrain` says drained but the node is schedulable: uncordoned by hand.
    UncordonedByHand { drain: String },
    /// The daemon asked for the drain and the drain controller has not finished it.
    DrainNotFinished {
        want: String,
        applied: Option<String>,
    },
    /// The drain annotations are not what the daemon leaves after a failed update of this
    /// config (it failed before asking for the drain, or someone edited them).
    NotDrained {
        want: String,
        desired: Option<String>,
        applied: Option<String>,
        unschedulable: bool,
    },
    /// A MachineConfig the node names is gone.
    ConfigGone {
        annotation: &'static str,
        config: String,
    },
    /// The source does not show MachineConfigs, so rule 5 cannot be checked.
    ConfigsUnknown,
    /// The node lacks `desiredConfig` or `currentConfig`.
    NoConfig { annotation: &'static str },
    /// The dump holds copies of the objects that disagree.
    CopiesDisagree,
}

/// Why a node is listed but not this tool's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `Unreconcilable`: MCO cannot apply the config at all; not an image problem.
    Unreconcilable,
    /// `Degraded` with no image to cancel (`desiredImage` absent or equal to `currentImage`):
    /// configuration drift or another failure. `earlier_recovery` when it carries mosc-guard's
    /// marker from a cancel it has moved on from (a reboot or a new target since).
    NoImageDifference { earlier_recovery: bool },
    /// Not `Degraded` (yet) while its `desiredImage` is lost: the daemon is still trying.
    StillTrying {
        state: Option<String>,
        image: String,
    },
    /// MCO places the node in no pool, so it manages it not at all.
    NoPool,
}

/// The verdict for `node` in `pool`, or `None` when there is nothing to say about it.
pub(super) fn diagnose(
    snapshot: &RecoverySnapshot,
    node: &RecoveryNode,
    pool: Option<&str>,
    registry: &RegistryAnswers,
) -> Option<Diagnosis> {
    let builds = &snapshot.objects.machine_os_builds;
    let marker = Marker::read(node);
    if let Some(marker) = marker.as_ref().filter(|m| cancel_holds(node, m)) {
        return match progress(node, marker, &snapshot.objects) {
            Progress::Waiting(waiting) => Some(Diagnosis::Cancelled {
                marker: marker.clone(),
                waiting,
            }),
            _ => None,
        };
    }
    let images = node.images();
    let differs = images.desired.filter(|d| images.current != Some(*d));
    let lost = differs.filter(|d| carrier(d, builds).is_none());
    // MCO manages no node it places in no pool: only one that looks stuck is worth a word.
    let Some(pool) = pool else {
        let stuck = node.state() == Some("Degraded") && lost.is_some();
        return stuck.then_some(Diagnosis::OutOfScope(Scope::NoPool));
    };
    match node.state() {
        Some("Degraded") => {}
        Some("Unreconcilable") => return Some(Diagnosis::OutOfScope(Scope::Unreconcilable)),
        state => {
            return lost.map(|image| {
                Diagnosis::OutOfScope(Scope::StillTrying {
                    state: state.map(str::to_string),
                    image: image.to_string(),
                })
            });
        }
    }
    let Some(desired) = differs else {
        return Some(Diagnosis::OutOfScope(Scope::NoImageDifference {
            earlier_recovery: marker.is_some(),
        }));
    };
    if let Some(build) = carrier(desired, builds) {
        return Some(Diagnosis::NeedsAttention(vec![Problem::ImageCarried {
            image: desired.to_string(),
            build: build.name().to_string(),
        }]));
    }
    let image = desired.to_string();
    let (loss, problems) = match registry.judge(desired) {
        Judged::Available(said) => {
            return Some(Diagnosis::NeedsAttention(vec![Problem::ImageStillServed {
                image,
                said,
            }]));
        }
        Judged::Lost(loss) => (Some(loss), Vec::new()),
        Judged::Unverified(said) => (None, vec![Problem::ImageLossUnverified { image, said }]),
    };
    Some(lost_image_diagnosis(
        snapshot, node, pool, desired, loss, problems,
    ))
}

/// Rules 4 to 7 for a node stuck on `image` (rules 1 to 3 hold; `loss` is how rule 3b holds,
/// `None` with its problem in `problems` when it does not).
fn lost_image_diagnosis(
    snapshot: &RecoverySnapshot,
    node: &RecoveryNode,
    pool: &str,
    image: &str,
    loss: Option<Loss>,
    mut problems: Vec<Problem>,
) -> Diagnosis {
    let pool_config = pool_config(snapshot, pool);
    if let PoolConfig::SendsImage { config } = &pool_config {
        problems.push(Problem::PoolTargeted {
            pool: pool.to_string(),
            config: config.clone(),
        });
    }
    let drain = drain(node, &mut problems);
    let configs = configs(snapshot, node, &mut problems);
    if snapshot.disagreeing.contains(&node.name) {
        problems.push(Problem::CopiesDisagree);
    }
    match (loss, drain, configs) {
        (Some(loss), Some(drain), Some((desired_config, current_config)))
            if problems.is_empty() =>
        {
            let marker = Marker::for_node(node);
            Diagnosis::Recoverable(Box::new(Recovery {
                image: image.to_string(),
                loss,
                current_image: node.current_image().map(str::to_string),
                desired_config: desired_config.to_string(),
                current_config: current_config.to_string(),
                drain,
                pool_config,
                patch: NodePatch::cancel(node, &marker, !node.single_node()),
                marker,
            }))
        }
        _ => Diagnosis::NeedsAttention(problems),
    }
}

/// A MachineOSConfig that targets a stuck node's pool, as the node controller would act on it
/// once the node is Done and schedulable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolConfig {
    /// No MachineOSConfig targets the pool.
    None,
    /// One does, and the pool is paused: the node controller sends nothing.
    Paused { config: String },
    /// One does, and it sends no image: the build for the pool's configuration has not
    /// succeeded with the config's image (`build`); that build pushes a new image first.
    Waiting { config: String, build: PoolBuild },
    /// One does and would send the node its image (`canLayeredContinue`, or the pool's
    /// configuration is not known): the pool must be paused first.
    SendsImage { config: String },
}

/// The MachineOSConfig that targets `pool` (MCO's `getConfigAndBuild`: by
/// `spec.machineConfigPool.name`), as the node controller would act on it.
fn pool_config(snapshot: &RecoverySnapshot, pool: &str) -> PoolConfig {
    let objects = &snapshot.objects;
    let Some(config) = node_controller::config_of(pool, &objects.machine_os_configs) else {
        return PoolConfig::None;
    };
    let name = config.name().to_string();
    let Some(p) = objects.pools.iter().find(|p| p.name() == pool) else {
        return PoolConfig::SendsImage { config: name };
    };
    if p.is_paused() {
        return PoolConfig::Paused { config: name };
    }
    let builds = &objects.machine_os_builds;
    match (
        can_layered_continue(p, config, builds),
        pool_build(p, config, builds),
    ) {
        (Some(false), Some(build)) => PoolConfig::Waiting {
            config: name,
            build,
        },
        _ => PoolConfig::SendsImage { config: name },
    }
}

/// Rule 4: how the node is drained, or the problem.
fn drain(node: &RecoveryNode, problems: &mut Vec<Problem>) -> Option<Drain> {
    if node.single_node() {
        return Some(Drain::SingleNode);
    }
    // No desiredConfig: reported by the config rule.
    let config = node.desired_config()?;
    let want = format!("drain-{config}");
    let desired = node.desired_drain();
    let applied = node.last_applied_drain();
    let asked = desired == Some(want.as_str());
    let problem = match (asked, applied == Some(want.as_str()), node.unschedulable) {
        (true, true, true) => return Some(Drain::Drained(want)),
        (true, true, false) => Problem::UncordonedByHand { drain: want },
        (true, false, _) => Problem::DrainNotFinished {
            want,
            applied: applied.map(str::to_string),
        },
        (false, _, unschedulable) => Problem::NotDrained {
            want,
            desired: desired.map(str::to_string),
            applied: applied.map(str::to_string),
            unschedulable,
        },
    };
    problems.push(problem);
    None
}

/// Rule 5: the node's desired and current configs (both annotations present, for the patch's
/// tests and replace), the current one existing, or the problems.
fn configs<'n>(
    snapshot: &RecoverySnapshot,
    node: &'n RecoveryNode,
    problems: &mut Vec<Problem>,
) -> Option<(&'n str, &'n str)> {
    let desired = node.desired_config();
    if desired.is_none() {
        problems.push(Problem::NoConfig {
            annotation: DESIRED_CONFIG,
        });
    }
    let Some(current) = node.current_config() else {
        problems.push(Problem::NoConfig {
            annotation: CURRENT_CONFIG,
        });
        return None;
    };
    let problem = match &snapshot.machine_configs {
        Some(known) if known.contains(current) => return Some((desired?, current)),
        Some(_) => Problem::ConfigGone {
            annotation: CURRENT_CONFIG,
            config: current.to_string(),
        },
        None => Problem::ConfigsUnknown,
    };
    problems.push(problem);
    None
}
