//! The node controller: rolls each pool's nodes to the pool's target (rendered config and, while
//! the pool's MOSC exists, its image), one batch of at most maxUnavailable at a time. Like 4.20 it
//! targets a layered pool's nodes only once a Succeeded build for the pool's current rendered
//! config carries the MOSC's image: while a build runs or after it failed, nodes stay put.

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::{Ctx, Reconciler};
use crate::Result;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE, STATE_DONE,
    STATE_WORKING, node_annotation, str_at,
};

pub(super) struct NodeController {
    ctx: Ctx,
}

/// What a pool's nodes should run.
pub(super) struct Target {
    pub config: String,
    /// `None`: not layered (no MOSC), so no desiredImage.
    pub image: Option<String>,
}

impl NodeController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    async fn sync_pool(
        &self,
        pool: &DynamicObject,
        members: &[&Node],
        moscs: &[DynamicObject],
        mosbs: &[DynamicObject],
    ) -> Result<()> {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        if pool
            .data
            .get("spec")
            .and_then(|s| s.get("paused"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            return Ok(());
        }
        if self.ctx.knobs(|k| k.held_pools.contains(&pool_name)) {
            return Ok(()); // The gap between two batches, held open by the test.
        }
        let Some(target) = pool_target(pool, moscs, mosbs) else {
            return Ok(()); // No succeeded build of the current config yet: nodes wait.
        };
        let max_unavailable = max_unavailable(pool, members.len());
        let unavailable = members.iter().filter(|n| is_unavailable(n)).count();
        let mut candidates: Vec<&&Node> = members
            .iter()
            .filter(|n| !is_unavailable(n) && needs_update(n, &target))
            .collect();
        candidates.sort_by_key(|n| n.metadata.name.clone());
        for node in candidates
            .into_iter()
            .take(max_unavailable.saturating_sub(unavailable))
        {
            let name = node.metadata.name.clone().unwrap_or_default();
            let patch = json!({"metadata": {"annotations": {
                DESIRED_IMAGE: target.image,
                DESIRED_CONFIG: target.config,
                STATE: STATE_WORKING,
            }}});
            self.ctx
                .write(
                    &format!("targeting node {name}"),
                    mco::nodes(&self.ctx.client).patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    ),
                )
                .await?;
            match &target.image {
                Some(image) => tracing::info!(
                    "sim node-controller: pool {pool_name}: node {name} -> desiredImage {image}, \
                     desiredConfig {}",
                    target.config
                ),
                None => tracing::info!(
                    "sim node-controller: pool {pool_name}: node {name} -> no desiredImage (pool is not \
                     layered), desiredConfig {}",
                    target.config
                ),
            }
        }
        Ok(())
    }
}

impl Reconciler for NodeController {
    async fn sync(&mut self) -> Result<()> {
        let pools = mco::list_all(&mco::mcps(&self.ctx.client)).await?;
        let moscs = mco::list_all(&mco::moscs(&self.ctx.client)).await?;
        let mosbs = mco::list_all(&mco::mosbs(&self.ctx.client)).await?;
        let nodes = mco::list_all(&mco::nodes(&self.ctx.client)).await?;
        for pool in &pools {
            let members = pool_members(pool, &pools, &nodes);
            self.sync_pool(pool, &members, &moscs, &mosbs).await?;
        }
        Ok(())
    }
}

/// The target of a pool: its rendered config, and while its MOSC exists (even with a
/// deletionTimestamp) the MOSC's image, once a Succeeded build of that MOSC for the rendered
/// config carries it. `None` (nodes wait) until then.
pub(super) fn pool_target(
    pool: &DynamicObject,
    moscs: &[DynamicObject],
    mosbs: &[DynamicObject],
) -> Option<Target> {
    let config = mco::pool_target_config(pool);
    let Some(mosc) = pool_mosc(pool, moscs) else {
        return Some(Target {
            config,
            image: None,
        });
    };
    let image = str_at(&mosc.data, &["status", "currentImagePullSpec"])?;
    current_build(mosc, &config, mosbs)
        .filter(|b| mco::condition_true(b, "Succeeded"))
        .filter(|b| str_at(&b.data, &["status", "digestedImagePushSpec"]) == Some(image))?;
    Some(Target {
        config,
        image: Some(image.to_owned()),
    })
}

/// The build of `mosc` for the rendered config `config` (not one being deleted), if any: the
/// one named from the MOSC's current spec and the config, as the build controller names it (a
/// MOSC whose spec changed has several builds for one config; only this one is current).
pub(super) fn current_build<'a>(
    mosc: &DynamicObject,
    config: &str,
    mosbs: &'a [DynamicObject],
) -> Option<&'a DynamicObject> {
    let name = mosc.metadata.name.as_deref()?;
    let expected = super::build::mosb_name(name, mosc, config);
    mosbs.iter().find(|b| {
        b.metadata.deletion_timestamp.is_none()
            && b.metadata.name.as_deref() == Some(expected.as_str())
            && str_at(&b.data, &["spec", "machineOSConfig", "name"]) == Some(name)
            && str_at(&b.data, &["spec", "machineConfig", "name"]) == Some(config)
    })
}

/// The MOSC that opts the pool into image mode, if any.
pub(super) fn pool_mosc<'a>(
    pool: &DynamicObject,
    moscs: &'a [DynamicObject],
) -> Option<&'a DynamicObject> {
    let name = pool.metadata.name.as_deref()?;
    moscs
        .iter()
        .find(|m| str_at(&m.data, &["spec", "machineConfigPool", "name"]) == Some(name))
}

/// Nodes of a pool as MCO places them: [`mco::pool_members`] (`helpers.GetNodesForPool`,
/// over [`mco::primary_pool`]). The node controller, the pool status and the build
/// controller's in-use check all use this one function.
pub(super) use crate::mco::pool_members;

/// A node is unavailable for a new update while its daemon works, is degraded, or has not
/// reached what it was told to run.
pub(super) fn is_unavailable(node: &Node) -> bool {
    let state = node_annotation(node, STATE);
    (state.is_some() && state != Some(STATE_DONE))
        || node_annotation(node, DESIRED_CONFIG) != node_annotation(node, CURRENT_CONFIG)
        || node_annotation(node, DESIRED_IMAGE) != node_annotation(node, CURRENT_IMAGE)
}

fn needs_update(node: &Node, target: &Target) -> bool {
    node_annotation(node, DESIRED_IMAGE) != target.image.as_deref()
        || node_annotation(node, DESIRED_CONFIG) != Some(target.config.as_str())
}

/// `spec.maxUnavailable` as a node count (int or "N%", default 1, at least 1).
fn max_unavailable(pool: &DynamicObject, members: usize) -> usize {
    let value = pool.data.get("spec").and_then(|s| s.get("maxUnavailable"));
    let n = match value {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(1),
        Some(Value::String(s)) => match s.strip_suffix('%').map(str::parse::<usize>) {
            Some(Ok(pct)) => members * pct / 100,
            _ => s.parse().unwrap_or(1),
        },
        _ => 1,
    };
    n.max(1)
}
