//! The machine-config-daemon of every node: a node in state Working gets its desired image
//! pulled from the registry (with retries) and ends Done, or Degraded with rpm-ostree's error.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinSet;

use super::ctx::Ctx;
use super::reconcile::{Reconciler, is_conflict};
use crate::Result;
use crate::image_ref::ImageRef;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, REASON, STATE,
    STATE_DEGRADED, STATE_DONE, STATE_WORKING, node_annotation,
};

/// Starts one update task per node in state Working (not held, none running yet).
pub(super) struct Daemons {
    ctx: Ctx,
    /// Running update task -> node.
    running: HashMap<tokio::task::Id, String>,
    // Dropping the set (when the loop is aborted) aborts the running updates.
    tasks: JoinSet<()>,
}

impl Daemons {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            running: HashMap::new(),
            tasks: JoinSet::new(),
        }
    }
}

impl Reconciler for Daemons {
    async fn sync(&mut self) -> Result<()> {
        while let Some(done) = self.tasks.try_join_next_with_id() {
            let id = match done {
                Ok((id, ())) => id,
                Err(e) => e.id(),
            };
            self.running.remove(&id);
        }
        let nodes = mco::list_all(&mco::nodes(&self.ctx.client)).await?;
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            if node_annotation(&node, STATE) != Some(STATE_WORKING)
                || self.ctx.is_held(&name)
                || self.running.values().any(|n| *n == name)
            {
                continue;
            }
            let ctx = self.ctx.clone();
            let task_name = name.clone();
            let handle = self.tasks.spawn(async move {
                if let Err(e) = update(&ctx, &node).await {
                    tracing::warn!("sim daemon {task_name}: {e}");
                }
            });
            self.running.insert(handle.id(), name);
        }
        Ok(())
    }
}

/// One update of one node, from the annotations it had when the update started.
async fn update(ctx: &Ctx, node: &Node) -> Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let desired_image = node_annotation(node, DESIRED_IMAGE).map(str::to_owned);
    let current_image = node_annotation(node, CURRENT_IMAGE).map(str::to_owned);
    let desired_config = node_annotation(node, DESIRED_CONFIG).map(str::to_owned);
    tokio::time::sleep(ctx.cfg.pull_delay).await;
    if ctx.is_held(&name) {
        return Ok(());
    }
    let annotations = match (&desired_image, &current_image) {
        (Some(image), current) if current.as_ref() != Some(image) => {
            match pull(ctx, &format!("daemon {name}"), image, || ctx.is_held(&name)).await {
                Pull::Held => return Ok(()),
                Pull::Ok => {
                    tracing::info!("sim daemon {name}: rebased to {image}; Done");
                    json!({CURRENT_IMAGE: image, CURRENT_CONFIG: desired_config, STATE: STATE_DONE, REASON: null})
                }
                Pull::Failed(reason) => {
                    tracing::info!("sim daemon {name}: Degraded: {reason}");
                    json!({STATE: STATE_DEGRADED, REASON: reason})
                }
            }
        }
        (None, Some(old)) => {
            // Leaving image mode: rebase to the rendered config's base OS image, no registry needed.
            tracing::info!(
                "sim daemon {name}: left layered image {old} for the base OS image; Done"
            );
            json!({CURRENT_IMAGE: null, CURRENT_CONFIG: desired_config, STATE: STATE_DONE, REASON: null})
        }
        _ => {
            tracing::info!("sim daemon {name}: config {desired_config:?} applied; Done");
            json!({CURRENT_CONFIG: desired_config, STATE: STATE_DONE, REASON: null})
        }
    };
    // Write only if the node still asks for what this update did (optimistic concurrency).
    let api = mco::nodes(&ctx.client);
    let fresh = api.get(&name).await?;
    if node_annotation(&fresh, DESIRED_IMAGE) != desired_image.as_deref()
        || node_annotation(&fresh, DESIRED_CONFIG) != desired_config.as_deref()
        || node_annotation(&fresh, STATE) != Some(STATE_WORKING)
    {
        tracing::info!("sim daemon {name}: node changed during the update; starting over");
        return Ok(());
    }
    let patch = json!({"metadata": {"resourceVersion": fresh.metadata.resource_version, "annotations": annotations}});
    match ctx
        .write(
            &format!("reporting the update of node {name}"),
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => Ok(()), // Next pass starts over.
        Err(e) => Err(e.into()),
    }
}

/// How a pull of the desired image ended.
pub(super) enum Pull {
    Ok,
    /// Stopped because the node (or machine) is held.
    Held,
    /// The node's degraded reason.
    Failed(String),
}

/// `rpm-ostree rebase ostree-unverified-registry:<image>` by `who` (a node's daemon, or a
/// machine's first boot): pulls the manifest, retrying; stops early while `held()`.
pub(super) async fn pull(ctx: &Ctx, who: &str, image: &str, held: impl Fn() -> bool) -> Pull {
    let attempts = ctx.cfg.pull_retries + 1;
    let mut last_error = String::new();
    for attempt in 1..=attempts {
        if held() {
            return Pull::Held;
        }
        let result = match ImageRef::parse(image) {
            Err(e) => Err(format!("invalid image reference {image}: {e}")),
            Ok(r) if r.host != ctx.registry.host() => Err(format!(
                "reading manifest {} in {}: pinging container registry {}: connection refused",
                r.reference().unwrap_or("latest"),
                r.repository(),
                r.host
            )),
            Ok(r) => {
                let reference = r.reference().unwrap_or("latest").to_owned();
                ctx.registry
                    .pull_manifest(&r.repo, &reference)
                    .await
                    .map_err(|e| format!("reading manifest {reference} in {}: {e}", r.repository()))
            }
        };
        match result {
            Ok(()) => return Pull::Ok,
            Err(e) => {
                tracing::info!(
                    "sim {who}: pull attempt {attempt}/{attempts} of {image} failed: {e}"
                );
                last_error = e;
            }
        }
        if attempt < attempts {
            tokio::time::sleep(ctx.cfg.retry_interval).await;
        }
    }
    Pull::Failed(format!(
        "error running rpm-ostree rebase --experimental ostree-unverified-registry:{image}: error: \
         Creating importer: failed to invoke method OpenImage: failed to invoke method OpenImage: {last_error}"
    ))
}
