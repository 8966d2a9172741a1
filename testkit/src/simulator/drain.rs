//! The drain controller (`pkg/controller/drain/drain_controller.go`, release-4.20): carries out
//! the requests the daemons write in `desiredDrain` and reports each in `lastAppliedDrain`.
//! `drain-<config>` cordons the node (`spec.unschedulable: true`; there are no pods to evict
//! here), checks it is still cordoned (an uncordon by hand during the drain is not reported as
//! done), then writes `lastAppliedDrain`; `uncordon-<config>` uncordons it and writes
//! `lastAppliedDrain`. A request already applied is left alone, so a node uncordoned by hand
//! after its drain stays uncordoned. A request is carried out [`super::SimConfig::drain_delay`]
//! after the controller first saw it (its queue's `UpdateDelay`, 5 s in MCO): the uncordon
//! comes before `lastAppliedDrain`, and before the daemon's next check.

use std::collections::HashMap;
use std::time::Instant;

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
    /// Node -> the request not applied yet, and when it was first seen (its queue time).
    queued: HashMap<String, (String, Instant)>,
}

impl DrainController {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            queued: HashMap::new(),
        }
    }

    /// Whether `request` on `node` has waited out the queue's delay (queued now if new).
    fn due(&mut self, node: &str, request: &str) -> bool {
        let now = Instant::now();
        let entry = self
            .queued
            .entry(node.to_owned())
            .or_insert_with(|| (request.to_owned(), now));
        if entry.0 != request {
            *entry = (request.to_owned(), now);
        }
        now.duration_since(entry.1) >= self.ctx.node_delays().drain
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
        let nodes = self.ctx.list(&mco::nodes(&self.ctx.client)).await?;
        let mut failures = Vec::new();
        let mut pending = Vec::new();
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let request = annotation(node, DESIRED_DRAIN);
            if request == annotation(node, LAST_APPLIED_DRAIN) {
                continue;
            }
            pending.push(name.clone());
            if !self.due(&name, request) {
                continue;
            }
            if let Err(e) = self.carry_out(node, request).await {
                failures.push(e.to_string());
            }
        }
        self.queued.retain(|node, _| pending.contains(node));
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; ").into())
        }
    }

    fn waiting(&self) -> bool {
        !self.queued.is_empty()
    }
}
