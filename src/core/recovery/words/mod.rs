//! The words of a recovery plan: why a node qualifies, what a person must do instead, why a
//! node is not this tool's; and the plan as text. [`super::report`] puts the same words in JSON;
//! [`apply`] words `recover --apply`'s progress.

pub mod apply;

pub use apply::event_note;

use std::fmt::Write as _;

use crate::core::image::abbreviate;
use crate::core::model::node_annotations::{
    CONTROL_PLANE_TOPOLOGY, DESIRED_DRAIN, LAST_APPLIED_DRAIN,
};
use crate::core::node_controller::PoolBuild;
use crate::core::report::columns;

use super::loss::{Loss, RegistrySaid};
use super::rules::{Drain, PoolConfig, Problem, Scope};
use super::{Diagnosis, NodePlan, Plan, Recovery};

/// Why a recoverable node qualifies, one line per rule, then what the patch does.
pub fn why_recoverable(plan: &NodePlan, r: &Recovery) -> Vec<String> {
    let pool = plan.pool.as_deref().unwrap_or_default();
    let first = match &r.current_image {
        Some(c) => format!(
            "state=Degraded, desiredImage {} differs from its currentImage {}",
            abbreviate(&r.image),
            abbreviate(c)
        ),
        None => format!(
            "state=Degraded, desiredImage {} while the node has no currentImage (its first \
             layered image)",
            abbreviate(&r.image)
        ),
    };
    let mut lines = vec![
        first,
        "no MachineOSBuild carries that image: no MCO object can rebuild or serve it, and MCO \
         never retargets the node by itself"
            .to_string(),
        loss(&r.loss),
        match &r.drain {
            Drain::Drained(value) => format!(
                "drained as the daemon leaves a failed update: desiredDrain = lastAppliedDrain = \
                 {value}, node cordoned"
            ),
            Drain::SingleNode => format!(
                "single-node ({CONTROL_PLANE_TOPOLOGY}=SingleReplica): the daemon does not drain; \
                 not required"
            ),
        },
        format!(
            "the rendered MachineConfig of its currentConfig exists: {} (after the cancel both \
             desiredConfig and currentConfig name it, and the daemon reads only those; {} is \
             not read again)",
            r.current_config, r.desired_config
        ),
        match &r.pool_config {
            PoolConfig::Paused { config } => format!(
                "MachineOSConfig {config} targets pool {pool}, which is paused: the node \
                 controller does not send the node back to its image while paused; unpause the \
                 pool once it is no longer degraded and the build is current"
            ),
            PoolConfig::Waiting { config, build } => format!(
                "MachineOSConfig {config} targets pool {pool} but sends its nodes no image: {}; \
                 MCO sends the image only once that build has succeeded with the config's image \
                 (canLayeredContinue), and that build pushes a new one",
                pool_build(build)
            ),
            PoolConfig::None | PoolConfig::SendsImage { .. } => {
                format!("no MachineOSConfig targets pool {pool}")
            }
        },
    ];
    let image = match &r.current_image {
        Some(_) => "sets desiredImage back to currentImage",
        None => "removes desiredImage (the node has no currentImage)",
    };
    lines.push(format!(
        "the patch {image}, sets desiredConfig back to {} and records what it read (annotation \
         mosc-guard.dev/recovery); the daemon then finds nothing to change, asks for the uncordon \
         and reports Done, without a reboot; MCO then sends the node the pool's target as usual",
        r.current_config
    ));
    lines
}

/// What is wrong, in one sentence.
pub fn problem(p: &Problem) -> String {
    match p {
        Problem::ImageCarried { image, build } => format!(
            "its desiredImage {} is still carried by MachineOSBuild {build}: the pull failed for \
             another reason (the registry, its credentials), and the daemon retries by itself",
            abbreviate(image)
        ),
        Problem::ImageStillServed { image, said } => format!(
            "its registry still serves its desiredImage {}, asked as the node pulls it ({}): the \
             daemon retries the rebase by itself and can still succeed, and a cancel landing \
             during a retry that succeeds makes the node worse (it reboots into the image, whose \
             config then wins over the cancelled annotations, and is drained back)",
            abbreviate(image),
            said.why
        ),
        Problem::ImageLossUnverified { image, said } => format!(
            "the loss of its desiredImage {} is not verified: {}; if the image is only \
             unreachable, the daemon's retry can still succeed, and a cancel landing then makes \
             the node worse",
            abbreviate(image),
            unverified(said)
        ),
        Problem::PoolTargeted { pool, config } => format!(
            "MachineOSConfig {config} targets pool {pool}, the pool is not paused and the \
             config's build for the pool's configuration has succeeded: once Done and \
             schedulable, the node would be sent straight back to that config's image"
        ),
        Problem::UncordonedByHand { drain } => format!(
            "the node was uncordoned by hand: {LAST_APPLIED_DRAIN} says {drain} but the node is \
             schedulable; the daemon skips a drain it finds done, so its next update of this \
             config would reboot the node with workloads running"
        ),
        Problem::DrainNotFinished { want, applied } => format!(
            "the drain has not finished: {DESIRED_DRAIN}={want}, {LAST_APPLIED_DRAIN}={}",
            applied.as_deref().unwrap_or("<none>")
        ),
        Problem::NotDrained {
            want,
            desired,
            applied,
            unschedulable,
        } => format!(
            "not drained as the daemon leaves a failed update (want {DESIRED_DRAIN} = \
             {LAST_APPLIED_DRAIN} = {want} and cordoned; it has {}, {} and is {}): the update \
             failed before its drain, or the annotations were edited",
            desired.as_deref().unwrap_or("<none>"),
            applied.as_deref().unwrap_or("<none>"),
            if *unschedulable {
                "cordoned"
            } else {
                "schedulable"
            }
        ),
        Problem::ConfigGone { annotation, config } => format!(
            "the rendered MachineConfig {config} its {} names is gone: the daemon cannot work out \
             the update without it",
            short(annotation)
        ),
        Problem::ConfigsUnknown => "the source holds no MachineConfigs, so whether the rendered \
             MachineConfigs the node names exist cannot be told"
            .to_string(),
        Problem::NoConfig { annotation } => {
            format!("the node has no {} annotation", short(annotation))
        }
        Problem::CopiesDisagree => "the dump holds copies of the objects that disagree, with \
             nothing to choose between them"
            .to_string(),
    }
}

/// Every problem, in one text.
pub fn problems_text(problems: &[Problem]) -> String {
    problems.iter().map(problem).collect::<Vec<_>>().join("; ")
}

/// What to do about it: commands where there is one.
pub fn remedy(p: &Problem, node: &str) -> String {
    match p {
        Problem::ImageCarried { .. } => format!(
            "do not cancel: fix the pull (oc describe node {node}; the machine-config-daemon's \
             log on it: oc -n openshift-machine-config-operator logs -l \
             k8s-app=machine-config-daemon --field-selector spec.nodeName={node} -c \
             machine-config-daemon)"
        ),
        Problem::ImageStillServed { .. } => format!(
            "do not cancel: let the daemon retry (it re-reads the node on every pass, at most 60 s \
             apart); if it keeps failing, find why its pull fails (oc describe node {node}; the \
             daemon's log: oc -n openshift-machine-config-operator logs -l \
             k8s-app=machine-config-daemon --field-selector spec.nodeName={node} -c \
             machine-config-daemon); run recover again if the registry later says the image is gone"
        ),
        Problem::ImageLossUnverified { .. } => "make sure the image is gone where the node pulls \
             it: mosc-guard images (the node's pull secret, CAs, mirrors), or the registry itself; \
             fix what keeps the registry from answering and run recover again, or, once you have \
             verified the loss yourself, run recover again with --image-loss-verified (an image \
             the registry still serves is never cancelled)"
            .to_string(),
        Problem::PoolTargeted { pool, .. } => format!(
            "pause the pool first: oc patch mcp {pool} --type=merge -p '{{\"spec\":{{\"paused\":true}}}}' \
             (unpause once the pool is no longer degraded and its build is current), then run \
             recover again"
        ),
        Problem::UncordonedByHand { .. } => format!(
            "cordon it again first (oc adm cordon {node}), so the node is as the daemon left \
             it and no retry of the failed update can reboot it under workloads, then run \
             recover again"
        ),
        Problem::DrainNotFinished { .. } => "wait for the drain controller (a PodDisruptionBudget \
             may hold it: oc -n openshift-machine-config-operator logs deploy/machine-config-controller \
             -c machine-config-controller), then run recover again"
            .to_string(),
        Problem::NotDrained { .. } => "this is not the state the tool recovers: find out why \
             (oc describe node, the daemon's log) and contact support"
            .to_string(),
        Problem::ConfigGone { .. } | Problem::NoConfig { .. } => "cancelling is not safe without \
             it: contact support with a must-gather"
            .to_string(),
        Problem::ConfigsUnknown => "plan against the live cluster, or a must-gather that holds \
             cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigs/"
            .to_string(),
        Problem::CopiesDisagree => {
            "collect the objects again (oc adm must-gather), or plan against the live cluster"
                .to_string()
        }
    }
}

/// A stable name for a problem, for scripts (`problems` in the JSON).
pub fn problem_code(p: &Problem) -> &'static str {
    match p {
        Problem::ImageCarried { .. } => "imageStillCarried",
        Problem::ImageStillServed { .. } => "imageStillServed",
        Problem::ImageLossUnverified { .. } => "imageLossUnverified",
        Problem::PoolTargeted { .. } => "poolTargetedNotPaused",
        Problem::UncordonedByHand { .. } => "uncordonedByHand",
        Problem::DrainNotFinished { .. } => "drainNotFinished",
        Problem::NotDrained { .. } => "notDrained",
        Problem::ConfigGone { .. } => "machineConfigGone",
        Problem::ConfigsUnknown => "machineConfigsUnknown",
        Problem::NoConfig { .. } => "configAnnotationMissing",
        Problem::CopiesDisagree => "copiesDisagree",
    }
}

/// Why a node is not this tool's.
pub fn scope(s: &Scope) -> String {
    match s {
        Scope::Unreconcilable => "Unreconcilable: MCO cannot apply the config at all; not a lost \
             image (see its reason annotation); nothing patched"
            .to_string(),
        Scope::NoImageDifference { earlier_recovery } => {
            let earlier = if *earlier_recovery {
                " (mosc-guard cancelled a target of it earlier; it has rebooted or been sent a new \
                 target since, so that cancel is over)"
            } else {
                ""
            };
            format!(
                "Degraded with no image to cancel (desiredImage absent or equal to currentImage): \
                 configuration drift or another failure, see its reason annotation; nothing \
                 patched{earlier}"
            )
        }
        Scope::StillTrying { state, image } => format!(
            "state {} toward {}, an image no MachineOSBuild carries: its daemon is still trying \
             (it reports Degraded once its retries run out); run recover again then",
            state.as_deref().unwrap_or("<none>"),
            abbreviate(image)
        ),
        Scope::NoPool => "MCO places the node in no pool, so it does not manage it; nothing \
             patched"
            .to_string(),
    }
}

/// A diagnosis in one line (what `--apply` says of a node that changed since the plan).
pub fn diagnosis(v: &Diagnosis) -> String {
    match v {
        Diagnosis::Recoverable(_) => "recoverable".to_string(),
        Diagnosis::Cancelled { waiting, .. } => cancelled(waiting),
        Diagnosis::NeedsAttention(problems) => {
            format!("it needs attention: {}", problems_text(problems))
        }
        Diagnosis::OutOfScope(s) => format!("not this tool's: {}", scope(s)),
    }
}

/// The waiting line of a cancelled node.
pub fn cancelled(waiting: &[String]) -> String {
    format!(
        "cancelled by mosc-guard recover earlier (annotation mosc-guard.dev/recovery); waiting \
         for its daemon's no-op update: {}",
        waiting.join(", ")
    )
}

/// Where the build for a pool's configuration stands, in words.
pub fn pool_build(build: &PoolBuild) -> String {
    match build {
        PoolBuild::Missing => {
            "no build for the pool's configuration yet (MCO builds none while the pool is \
             degraded)"
                .to_string()
        }
        PoolBuild::Running(b) => format!("its build {b} for the pool's configuration is running"),
        PoolBuild::Succeeded { build, .. } => format!(
            "its build {build} for the pool's configuration succeeded, but the config does not \
             point at its image yet"
        ),
        PoolBuild::Failed(b) => format!("its build {b} for the pool's configuration failed"),
    }
}

/// How the loss of a recoverable node's image is known, in one line.
pub fn loss(loss: &Loss) -> String {
    match loss {
        Loss::Verified(said) => format!(
            "its registry, asked as the node pulls it, says the image is gone: {}",
            said.why
        ),
        Loss::AdminVerified(said) => format!(
            "the loss was not verified by the registry ({}); --image-loss-verified says the \
             admin verified it",
            unverified(said)
        ),
        Loss::Unverified(said) => format!(
            "the loss was not verified by the registry ({}); this plan is a preview: recover \
             --apply asks the registry again right before each patch and cancels only an image \
             it says is missing (or, with --image-loss-verified, one it cannot tell about)",
            unverified(said)
        ),
    }
}

/// Why the registry's word does not settle the loss: not asked, or what it could not tell.
fn unverified(said: &RegistrySaid) -> String {
    match said.status {
        None => format!("the registry was not asked: {}", said.why),
        Some(_) => format!("the registry could not tell: {}", said.why),
    }
}

/// The last part of an MCO annotation key (`desiredConfig`).
fn short(annotation: &str) -> &str {
    annotation.rsplit('/').next().unwrap_or(annotation)
}

/// The plan as text: one block per node, recoverable ones with their `oc patch` command.
pub fn text(plan: &Plan) -> String {
    if plan.nodes.is_empty() {
        return "No node is stuck on a lost image: nothing to recover.\n".to_string();
    }
    let mut out = String::new();
    for n in &plan.nodes {
        let (kind, lines) = match &n.diagnosis {
            Diagnosis::Recoverable(r) => ("RECOVERABLE", why_recoverable(n, r)),
            Diagnosis::Cancelled { waiting, .. } => ("CANCELLED", vec![cancelled(waiting)]),
            Diagnosis::NeedsAttention(problems) => {
                let each = |p| format!("{}\n    do: {}", problem(p), remedy(p, &n.node));
                ("NEEDS ATTENTION", problems.iter().map(each).collect())
            }
            Diagnosis::OutOfScope(s) => ("NOT THIS TOOL'S", vec![scope(s)]),
        };
        let pool = n.pool.as_deref().unwrap_or("<no pool>");
        let _ = writeln!(out, "{kind} node {} (pool {pool})", n.node);
        for line in lines {
            let _ = writeln!(out, "  - {line}");
        }
        if let Diagnosis::Recoverable(r) = &n.diagnosis {
            let _ = writeln!(out, "  {}", r.patch.command(&n.node));
        }
    }
    out
}

/// `check --all`'s list of nodes stuck on a lost image (empty when there is none).
pub fn stuck_table(stuck: &[super::stuck::Stuck]) -> String {
    if stuck.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 3]> = stuck
        .iter()
        .map(|s| {
            [
                s.node.clone(),
                s.pool.clone().unwrap_or_else(|| "-".to_string()),
                abbreviate(&s.image),
            ]
        })
        .collect();
    format!(
        "\n{} node(s) stuck on a lost image (Degraded; no MachineOSBuild carries their \
         desiredImage); `mosc-guard recover` plans how to heal them:\n{}",
        stuck.len(),
        columns(["NODE", "POOL", "DESIRED IMAGE"], &rows)
    )
}

/// One line per stuck node, for `check --all -o json`'s warnings on stderr.
pub fn stuck_warning(s: &super::stuck::Stuck) -> String {
    format!(
        "node {} (pool {}) is stuck on a lost image: Degraded, and no MachineOSBuild carries its \
         desiredImage {}; `mosc-guard recover` plans how to heal it",
        s.node,
        s.pool.as_deref().unwrap_or("-"),
        abbreviate(&s.image)
    )
}
