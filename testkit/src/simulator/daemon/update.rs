//! One pass of one node's daemon carried out, step by step as MCO's daemon (release-4.20) takes
//! them: `SetWorking` (not while Degraded), `performDrain` (`desiredDrain=drain-<config>`, then
//! wait for the drain controller's `lastAppliedDrain`), the rebase, the reboot (a new
//! `status.nodeInfo.bootID`), `completeUpdate` (`desiredDrain=uncordon-<config>`, wait), and
//! `SetDone` (state Done, currentConfig and currentImage from what the machine runs, `reason`
//! cleared, empty image annotations dropped). A failed rebase rolls back what it staged (nothing
//! is written before the rebase succeeds), leaves the node cordoned and writes only `state` and
//! `reason` (`SetDegraded`): the caller retries later ([`super::Daemons`]).
//!
//! The daemon finishes from the copy of the node it read before `completeUpdate`
//! (`getStateAndConfigs` in `finishRebootlessUpdate`, update.go; `SetDone` from that state,
//! writer.go), not from a read after the uncordon: a target the node controller sends while the
//! daemon waits for its uncordon is followed by `SetDone` all the same, and `desiredImage` is
//! dropped if the copy had none ([`finish`]).

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::super::ctx::Ctx;
use super::Disks;
use super::plan::{Change, Disk, Goal, Pass, Update};
use super::rebase::{Pull, pull};
use crate::Result;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE,
    LAST_APPLIED_DRAIN, REASON, STATE, STATE_DEGRADED, STATE_DONE, STATE_WORKING, node_annotation,
    uncordon_request,
};

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It did what it planned, or stopped to start over at the next pass (held, or the node's
    /// target changed meanwhile).
    Progressed,
    /// The node is Degraded: the daemon retries after a back-off.
    Degraded,
}

/// Carries out `pass` (planned from `node`, whose machine runs `disk`).
pub(super) async fn run(ctx: &Ctx, disks: &Disks, node: &Node, pass: Pass) -> Result<Outcome> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let daemon = NodeDaemon { ctx, disks, name };
    match pass {
        Pass::Idle | Pass::AwaitDrain => Ok(Outcome::Progressed),
        Pass::MissingConfig(reason) => {
            if ctx.is_held(&daemon.name) {
                return Ok(Outcome::Progressed);
            }
            daemon.set_degraded(&reason).await?;
            Ok(Outcome::Degraded)
        }
        Pass::Update(update) => daemon.update(node, update).await,
    }
}

struct NodeDaemon<'a> {
    ctx: &'a Ctx,
    disks: &'a Disks,
    name: String,
}

impl NodeDaemon<'_> {
    async fn update(&self, node: &Node, update: Update) -> Result<Outcome> {
        let name = &self.name;
        if update.set_working {
            self.annotate(json!({STATE: STATE_WORKING}), "setting Working")
                .await?;
        }
        if let Some(request) = &update.drain {
            tracing::info!("sim daemon {name}: requesting {request}");
            self.request_drain(request).await?;
        }
        if self.ctx.is_held(name) {
            while self.ctx.is_held(name) {
                tokio::time::sleep(self.ctx.cfg.poll_interval).await;
            }
            if goal_of(&self.get().await?) != update.goal {
                tracing::info!("sim daemon {name}: node changed while held; starting over");
                return Ok(Outcome::Progressed);
            }
        }
        tokio::time::sleep(self.ctx.cfg.pull_delay).await;
        let mut disk = self.disks.of(node);
        if let Some(change) = &update.change {
            if let Change::Rebase(image) = change {
                let who = format!("daemon {name}");
                match pull(self.ctx, &who, image, || self.ctx.is_held(name)).await {
                    Pull::Ok => {}
                    Pull::Held => return Ok(Outcome::Progressed),
                    Pull::Failed(error) => {
                        let form = self.ctx.release().row().rebase_reason;
                        self.set_degraded(&form.reason(image, &error)).await?;
                        return Ok(Outcome::Degraded);
                    }
                }
            }
            disk = Disk {
                config: update.goal.config.clone(),
                image: update.goal.image.clone(),
            };
            self.disks.set(node, disk.clone());
            self.reboot(change).await?;
        }
        // After the reboot (or none), `updateConfigAndState` on the copy read now: completes
        // only if the node still asks for what the machine now runs; otherwise the next pass
        // updates again.
        let Some(done) = finish(&self.get().await?, &disk) else {
            tracing::info!("sim daemon {name}: the node's target changed during the update");
            return Ok(Outcome::Progressed);
        };
        self.request_drain(&uncordon_request(&disk.config)).await?;
        while self.ctx.knobs(|k| k.held_before_done.contains(name)) {
            tokio::time::sleep(self.ctx.cfg.poll_interval).await;
        }
        self.annotate(done, "setting Done").await?;
        tracing::info!(
            "sim daemon {name}: Done on {} ({})",
            disk.config,
            disk.image.as_deref().unwrap_or("no layered image")
        );
        Ok(Outcome::Progressed)
    }

    async fn get(&self) -> Result<Node> {
        Ok(mco::nodes(&self.ctx.client).get(&self.name).await?)
    }

    /// Merge-patches the node's annotations.
    async fn annotate(&self, annotations: Value, what: &str) -> Result<()> {
        let patch = json!({"metadata": {"annotations": annotations}});
        self.ctx
            .write(
                &format!("{what} of node {}", self.name),
                mco::nodes(&self.ctx.client).patch(
                    &self.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ),
            )
            .await?;
        Ok(())
    }

    /// `SetDesiredDrainer(request)`, then looks every [`super::super::SimConfig::drain_check_interval`],
    /// the first time one interval later (`wait.PollUntilContextTimeout(..., false, ...)`),
    /// until the drain controller applied it.
    async fn request_drain(&self, request: &str) -> Result<()> {
        self.annotate(json!({DESIRED_DRAIN: request}), "requesting a drain")
            .await?;
        loop {
            tokio::time::sleep(self.ctx.node_delays().drain_check).await;
            let node = self.get().await?;
            if node_annotation(&node, LAST_APPLIED_DRAIN) == Some(request) {
                return Ok(());
            }
        }
    }

    /// The machine reboots into what it staged: a new boot ID (the kubelet reports it).
    async fn reboot(&self, change: &Change) -> Result<()> {
        let boot_id = crate::kubelet::new_boot_id(&self.name);
        tracing::info!(
            "sim daemon {}: {change:?} staged; rebooting (bootID {boot_id})",
            self.name
        );
        let patch = json!({"status": {"nodeInfo": {"bootID": boot_id}}});
        self.ctx
            .write(
                &format!("rebooting node {}", self.name),
                mco::nodes(&self.ctx.client).patch_status(
                    &self.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ),
            )
            .await?;
        Ok(())
    }

    /// `SetDegraded`: only `state` and `reason` (at most 2,000 characters).
    async fn set_degraded(&self, reason: &str) -> Result<()> {
        let reason: String = reason.chars().take(2000).collect();
        tracing::info!("sim daemon {}: Degraded: {reason}", self.name);
        self.annotate(
            json!({STATE: STATE_DEGRADED, REASON: reason}),
            "setting Degraded",
        )
        .await?;
        let name = self.name.clone();
        self.ctx
            .update_knobs(|k| *k.failed_updates.entry(name).or_default() += 1);
        Ok(())
    }
}

/// What the node is told to run.
fn goal_of(node: &Node) -> Goal {
    Goal {
        config: node_annotation(node, DESIRED_CONFIG)
            .unwrap_or_default()
            .to_owned(),
        image: node_annotation(node, DESIRED_IMAGE).map(str::to_owned),
    }
}

/// `updateConfigAndState` and `SetDone` on `copy`, the node as the daemon read it before
/// `completeUpdate`, whose machine now runs `disk`: `None` when the copy asks for something
/// else (the next pass updates again), else the annotations `SetDone` writes from that copy:
/// state Done, currentConfig and currentImage from the machine (currentImage removed when it
/// runs none), `reason` cleared (empty), `desiredImage` removed when the copy had none.
fn finish(copy: &Node, disk: &Disk) -> Option<Value> {
    let runs = Goal {
        config: disk.config.clone(),
        image: disk.image.clone(),
    };
    if goal_of(copy) != runs {
        return None;
    }
    let mut annotations = json!({
        STATE: STATE_DONE,
        CURRENT_CONFIG: disk.config,
        REASON: "",
        CURRENT_IMAGE: disk.image,
    });
    if node_annotation(copy, DESIRED_IMAGE).is_none() {
        annotations[DESIRED_IMAGE] = Value::Null;
    }
    Some(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R1: &str = "rendered-worker-1";
    const R2: &str = "rendered-worker-2";
    const IMAGE: &str = "registry.example.com/ocb-image@sha256:aaaa";

    fn node(annotations: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n", "annotations": annotations}}))
            .expect("node")
    }

    /// A cancelled target: the copy read before the uncordon asks for what the machine runs,
    /// so `SetDone` follows from it, even when the node controller sends the node its pool's
    /// target during the wait (a read after the wait would find `R2` and never report Done).
    #[test]
    fn set_done_comes_from_the_copy_read_before_the_uncordon() {
        let disk = Disk {
            config: R1.into(),
            image: None,
        };
        let copy = node(json!({STATE: STATE_DEGRADED, CURRENT_CONFIG: R1, DESIRED_CONFIG: R1}));
        let done = finish(&copy, &disk).expect("in its desired config");
        assert_eq!(done[STATE], STATE_DONE);
        assert_eq!(done[CURRENT_CONFIG], R1);
        assert_eq!(done[REASON], "");
        assert_eq!(done[CURRENT_IMAGE], Value::Null, "runs no image");
        assert_eq!(
            done[DESIRED_IMAGE],
            Value::Null,
            "the copy had no desiredImage"
        );

        let on_image = Disk {
            config: R1.into(),
            image: Some(IMAGE.into()),
        };
        let copy = node(json!({CURRENT_CONFIG: R1, DESIRED_CONFIG: R1, DESIRED_IMAGE: IMAGE}));
        let done = finish(&copy, &on_image).expect("in its desired config");
        assert_eq!(done[CURRENT_IMAGE], IMAGE);
        assert!(
            done.get(DESIRED_IMAGE).is_none(),
            "desiredImage left as it is"
        );

        let retargeted = node(json!({CURRENT_CONFIG: R1, DESIRED_CONFIG: R2}));
        assert_eq!(
            finish(&retargeted, &disk),
            None,
            "a copy asking for R2 updates again"
        );
    }
}
