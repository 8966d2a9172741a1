//! One pass of one node's daemon carried out, step by step as MCO's daemon (release-4.20) takes
//! them: `SetWorking` (not while Degraded), `performDrain` (`desiredDrain=drain-<config>`, then
//! wait for the drain controller's `lastAppliedDrain`), the rebase, the reboot (a new
//! `status.nodeInfo.bootID`), `completeUpdate` (`desiredDrain=uncordon-<config>`, wait), and
//! `SetDone` (state Done, currentConfig and currentImage from what the machine runs, `reason`
//! cleared, empty image annotations dropped). A failed rebase rolls back what it staged (nothing
//! is written before the rebase succeeds), leaves the node cordoned and writes only `state` and
//! `reason` (`SetDegraded`): the caller retries later ([`super::Daemons`]).

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
        // After the reboot (or none), `updateConfigAndState`: completes only if the node still
        // asks for what the machine now runs; otherwise the next pass updates again.
        if goal_of(&self.get().await?)
            != (Goal {
                config: disk.config.clone(),
                image: disk.image.clone(),
            })
        {
            tracing::info!("sim daemon {name}: the node's target changed during the update");
            return Ok(Outcome::Progressed);
        }
        self.request_drain(&uncordon_request(&disk.config)).await?;
        self.set_done(&disk).await?;
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

    /// `SetDesiredDrainer(request)`, then polls until the drain controller applied it.
    async fn request_drain(&self, request: &str) -> Result<()> {
        self.annotate(json!({DESIRED_DRAIN: request}), "requesting a drain")
            .await?;
        loop {
            let node = self.get().await?;
            if node_annotation(&node, LAST_APPLIED_DRAIN) == Some(request) {
                return Ok(());
            }
            tokio::time::sleep(self.ctx.cfg.poll_interval).await;
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

    /// `SetDone`: state Done, currentConfig and currentImage from the machine (currentImage
    /// removed when it runs none), `reason` cleared (empty), desiredImage removed when empty.
    async fn set_done(&self, disk: &Disk) -> Result<()> {
        let fresh = self.get().await?;
        let mut annotations = json!({
            STATE: STATE_DONE,
            CURRENT_CONFIG: disk.config,
            REASON: "",
            CURRENT_IMAGE: disk.image,
        });
        if node_annotation(&fresh, DESIRED_IMAGE).is_none() {
            annotations[DESIRED_IMAGE] = Value::Null;
        }
        self.annotate(annotations, "setting Done").await?;
        tracing::info!(
            "sim daemon {}: Done on {} ({})",
            self.name,
            disk.config,
            disk.image.as_deref().unwrap_or("no layered image")
        );
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
