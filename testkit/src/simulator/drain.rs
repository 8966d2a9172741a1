//! The drain controller (`pkg/controller/drain/drain_controller.go`, release-4.20): carries out
//! the requests the daemons write in `desiredDrain` and reports each in `lastAppliedDrain`.
//! `drain-<config>` cordons the node (`spec.unschedulable: true`; there are no pods to evict
//! here), checks it is still cordoned (an uncordon by hand during the drain is not reported as
//! done), then writes `lastAppliedDrain`; `uncordon-<config>` uncordons it and writes
//! `lastAppliedDrain`. A request already applied is left alone, so a node uncordoned by hand
//! after its drain stays uncordoned.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::ctx::Ctx;
use super::reconcile::Reconciler;
use crate::Result;
use crate::mco::{
    self, DESIRED_DRAIN, LAST_APPLIED_DRAIN, is_unschedulable, raw_annotation as annotation,
};

pub(super) struct DrainController {
    ctx: Ctx,
}

impl DrainController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    /// `syncNode` for one node whose request is not applied yet.
    async fn carry_out(&self, node: &Node, request: &str) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let cordon = match request.split('-').next() {
            Some("drain") => true,
            Some("uncordon") => false,
            _ => {
                return Err(
                    format!("node {name}: non-recognized drain verb detected {request}").into(),
                );
            }
        };
        let api = mco::nodes(&self.ctx.client);
        if is_unschedulable(node) != cordon {
            let patch = json!({"spec": {"unschedulable": cordon}});
            self.ctx
                .write(
                    &format!(
                        "{} node {name}",
                        if cordon { "cordoning" } else { "uncordoning" }
                    ),
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await?;
        }
        let fresh = api.get(&name).await?;
        if cordon && !is_unschedulable(&fresh) {
            tracing::info!(
                "sim drain-controller: node {name}: externally uncordoned during drain, skipping \
                 completion annotation"
            );
            return Ok(());
        }
        let patch = json!({"metadata": {"annotations": {LAST_APPLIED_DRAIN: request}}});
        self.ctx
            .write(
                &format!("reporting {request} of node {name}"),
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await?;
        tracing::info!("sim drain-controller: node {name}: {request} done");
        Ok(())
    }
}

impl Reconciler for DrainController {
    async fn sync(&mut self) -> Result<()> {
        let nodes = mco::list_all(&mco::nodes(&self.ctx.client)).await?;
        let mut failures = Vec::new();
        for node in &nodes {
            let request = annotation(node, DESIRED_DRAIN);
            if request == annotation(node, LAST_APPLIED_DRAIN) {
                continue;
            }
            if let Err(e) = self.carry_out(node, request).await {
                failures.push(e.to_string());
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; ").into())
        }
    }
}
