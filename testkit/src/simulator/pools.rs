//! MachineConfigPool status as MCO's node controller computes it (`calculateStatus`, status.go):
//! machine counts (ready: updated and schedulable; unavailable as [`is_unavailable`] counts) and
//! the Updated / Updating / NodeDegraded / Degraded conditions (a paused pool "will not update";
//! a layered pool that reported NodeDegraded is not "waiting for a build").

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::ctx::Ctx;
use super::node_state::{is_ready, is_unavailable};
use super::nodes::pool_members;
use super::pool_target::{pool_build, pool_mosc};
use super::reconcile::{Reconciler, now_rfc3339};
use crate::Result;
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, REASON, STATE, STATE_DONE,
    node_annotation, str_at,
};
use crate::release::Release;

pub(super) struct PoolStatus {
    ctx: Ctx,
}

impl PoolStatus {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }
}

impl Reconciler for PoolStatus {
    /// Its status follows from the API objects alone.
    fn waiting(&self) -> bool {
        false
    }

    async fn sync(&mut self) -> Result<()> {
        // Nodes first, as the node controller lists them: a node is never counted without its
        // pool.
        let nodes = self.ctx.list(&mco::nodes(&self.ctx.client)).await?;
        let pools = self.ctx.list(&mco::mcps(&self.ctx.client)).await?;
        let moscs = self.ctx.list(&mco::moscs(&self.ctx.client)).await?;
        let mosbs = self.ctx.list(&mco::mosbs(&self.ctx.client)).await?;
        for pool in &pools {
            let members = pool_members(pool, &pools, &nodes);
            let mosc = pool_mosc(pool, &moscs);
            let status = calculate(self.ctx.release(), pool, &members, mosc, &mosbs);
            let current = pool.data.get("status").cloned().unwrap_or(Value::Null);
            if without_times(&current) == without_times(&status) {
                continue;
            }
            let name = pool.metadata.name.clone().unwrap_or_default();
            log_change(&name, &current, &status);
            self.ctx
                .write(
                    &format!("status of pool {name}"),
                    mco::mcps(&self.ctx.client).patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": status})),
                    ),
                )
                .await?;
        }
        Ok(())
    }
}

/// The pool status MCO would report (keeping conditions it does not compute, and transition times
/// of conditions whose status did not change).
fn calculate(
    release: Release,
    pool: &DynamicObject,
    members: &[&Node],
    mosc: Option<&DynamicObject>,
    mosbs: &[DynamicObject],
) -> Value {
    let target_config = mco::pool_target_config(pool);
    let target_image = mosc.and_then(|m| str_at(&m.data, &["status", "currentImagePullSpec"]));
    let layered = target_image.is_some();
    let done = |n: &&&Node| {
        node_annotation(n, STATE) == Some(STATE_DONE)
            && node_annotation(n, DESIRED_CONFIG) == Some(target_config.as_str())
            && node_annotation(n, CURRENT_CONFIG) == Some(target_config.as_str())
            && node_annotation(n, DESIRED_IMAGE) == target_image
            && node_annotation(n, CURRENT_IMAGE) == target_image
    };
    let updated: Vec<&&Node> = members.iter().filter(done).collect();
    let ready = updated.iter().filter(|n| is_ready(n)).count();
    let degraded: Vec<&&Node> = members
        .iter()
        .filter(|n| node_annotation(n, DESIRED_CONFIG).is_some())
        .filter(|n| {
            matches!(
                node_annotation(n, STATE),
                Some("Degraded" | "Unreconcilable")
            )
        })
        .collect();
    let unavailable = members.iter().filter(|n| is_unavailable(n)).count();
    let machine_count = members.len();
    let all_updated = updated.len() == machine_count && ready == machine_count && unavailable == 0;
    let paused = pool.data.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);

    let update_line = match target_image {
        Some(image) if layered => format!("MachineConfig {target_config} / Image {image}"),
        _ => format!("MachineConfig {target_config}"),
    };
    let mut conds: Vec<(&str, bool, String, String)> = Vec::new();
    if all_updated {
        conds.push((
            "Updated",
            true,
            String::new(),
            format!("All nodes are updated with {update_line}"),
        ));
        conds.push(("Updating", false, String::new(), String::new()));
    } else if paused {
        conds.push(("Updated", false, String::new(), String::new()));
        conds.push((
            "Updating",
            false,
            String::new(),
            format!("Pool is paused; will not update to {update_line}"),
        ));
    } else {
        conds.push(("Updated", false, String::new(), String::new()));
        conds.push((
            "Updating",
            true,
            String::new(),
            format!("All nodes are updating to {update_line}"),
        ));
    }
    // While the pool reported NodeDegraded (or RenderDegraded), MCO reports no build wait.
    let was_degraded = ["NodeDegraded", "RenderDegraded"]
        .iter()
        .any(|t| mco::condition_true(pool, t));
    if mosc.is_some() && was_degraded && !paused {
        conds.push((
            "Updating",
            false,
            String::new(),
            "Pool update paused due to degraded condition".to_owned(),
        ));
    } else if let Some(mosc) = mosc.filter(|_| !paused) {
        let mosc_name = mosc.metadata.name.as_deref().unwrap_or_default();
        match pool_build(release, pool, mosc, mosbs, 0).build {
            None => conds.push((
                "Updating",
                true,
                String::new(),
                format!("Pool is waiting for a new OS image build to start (mosc: {mosc_name})"),
            )),
            Some(b)
                if mco::condition_true(b, "Failed") || mco::condition_true(b, "Interrupted") =>
            {
                conds.push((
                    "Updating",
                    false,
                    String::new(),
                    format!(
                        "Pool update stopped due to OS image build failure (mosb: {})",
                        b.metadata.name.as_deref().unwrap_or_default()
                    ),
                ))
            }
            Some(b) if !mco::condition_true(b, "Succeeded") => conds.push((
                "Updating",
                true,
                String::new(),
                format!(
                    "Pool is waiting for OS image build to complete (mosb: {})",
                    b.metadata.name.as_deref().unwrap_or_default()
                ),
            )),
            Some(_) => {}
        }
    }
    let degraded_message = degraded
        .iter()
        .filter_map(|n| {
            let reason = node_annotation(n, REASON)?;
            Some(format!(
                "Node {} is reporting: {reason:?}",
                n.metadata.name.as_deref().unwrap_or_default()
            ))
        })
        .collect::<Vec<_>>()
        .join(", ");
    if degraded.is_empty() {
        conds.push(("NodeDegraded", false, String::new(), String::new()));
        conds.push(("Degraded", false, String::new(), String::new()));
    } else {
        let reason = format!(
            "{} nodes are reporting degraded status on sync",
            degraded.len()
        );
        conds.push(("NodeDegraded", true, reason, degraded_message.clone()));
        conds.push(("Degraded", true, String::new(), degraded_message));
    }

    let existing = mco::conditions(pool);
    let now = now_rfc3339();
    let mut conditions: Vec<Value> = existing
        .iter()
        .filter(|c| {
            !conds
                .iter()
                .any(|(t, ..)| c.get("type").and_then(Value::as_str) == Some(*t))
        })
        .cloned()
        .collect();
    // Later entries for the same type win (the build-wait Updating message overrides the generic one).
    let mut merged: Vec<(&str, bool, String, String)> = Vec::new();
    for c in conds {
        merged.retain(|m| m.0 != c.0);
        merged.push(c);
    }
    for (type_, on, reason, message) in merged {
        let status = if on { "True" } else { "False" };
        let old = existing
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_));
        let since = old
            .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| Value::String(now.clone()));
        conditions.push(json!({
            "type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since,
        }));
    }
    conditions.sort_by_key(|c| {
        c.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    });

    let configuration = if all_updated {
        pool.data
            .get("spec")
            .and_then(|s| s.get("configuration"))
            .cloned()
    } else {
        pool.data
            .get("status")
            .and_then(|s| s.get("configuration"))
            .cloned()
    };
    json!({
        "observedGeneration": pool.metadata.generation,
        "configuration": configuration,
        "machineCount": machine_count,
        "updatedMachineCount": updated.len(),
        "readyMachineCount": ready,
        "unavailableMachineCount": unavailable,
        "degradedMachineCount": degraded.len(),
        "conditions": conditions,
    })
}

/// The status without condition transition times and nulls (for change detection).
fn without_times(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(obj) = s.as_object_mut() {
        obj.retain(|_, v| !v.is_null());
    }
    if let Some(conds) = s.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds {
            if let Some(obj) = c.as_object_mut() {
                obj.remove("lastTransitionTime");
            }
        }
    }
    s
}

/// Logs condition changes of a pool.
fn log_change(pool: &str, old: &Value, new: &Value) {
    let summary = |s: &Value| -> String {
        let conds = s
            .get("conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| {
                        Some(format!(
                            "{}={}",
                            c.get("type")?.as_str()?,
                            c.get("status")?.as_str()?
                        ))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        format!(
            "{conds} machines={} updated={} degraded={}",
            s.get("machineCount").unwrap_or(&Value::Null),
            s.get("updatedMachineCount").unwrap_or(&Value::Null),
            s.get("degradedMachineCount").unwrap_or(&Value::Null)
        )
    };
    let (before, after) = (summary(old), summary(new));
    if before != after {
        tracing::info!("sim pool-status: pool {pool}: {after}");
    }
}
