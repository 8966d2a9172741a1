//! `recover --apply`'s step: one node's turn, in the steps a reader can name: `reread` it and
//! what its plan rests on; `replan` it, the registry asked again whether its image is gone (an
//! image served again stops the cancel); `record` its annotations (a progress line, an Event on
//! the node); `patch` it, conditionally; then [`super::wait`] for its daemon's no-op update.
//! Anything unexpected stops the run with a report; nothing is ever escalated (no force file,
//! no uncordon, no write of `state`, `reason`, `currentConfig`, `currentImage` or the drain
//! annotations). A patch is one request that carries its own marker, so Ctrl-C leaves a node
//! untouched or cancelled, and the next run recognises which. An Event that cannot be written
//! is said and passed: the durable record is the marker.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

use kube::Client;
use serde::Serialize;

use crate::access::recovery::{self as live, PatchError};
use crate::access::registry::RegistryAsk;
use crate::core::recovery::words::apply as words;
use crate::core::recovery::{
    self, Diagnosis, NodePlan, Plan, Recovery, RecoverySnapshot, RegistrySaid,
};
use crate::telemetry::events::{self, REASON_RECOVERY};

use super::outcome::{self, Applied, Outcome};
use super::wait::{self, PoolWait};
use super::{Clock, Stage, Step, until_ctrl_c};

/// A node's result, as `--output json` prints it under `applied`.
pub(crate) type Entry = Applied<Node, Found>;

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Node {
    pub(crate) node: String,
    pub(crate) pool: Option<String>,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.node)
    }
}

impl outcome::Subject for Node {
    const THIS: &'static str = "this node";
}

impl Entry {
    /// Stopped where `stop` says, with what a person does about it.
    fn stop(self, clock: &Clock, stop: words::Stop) -> Self {
        let mut a = self.end(clock, Outcome::Stopped(stop.problem), stop.why);
        a.to_do = stop.to_do;
        a
    }
}

/// What a node's turn learnt on the way.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Found {
    /// The Event recorded on the node (`default/<name>`), or why it could not be.
    pub(crate) event: Option<String>,
    /// MCO's annotations as read right before the patch was attempted (absent if none was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) recorded: Option<BTreeMap<String, String>>,
    /// What the registry said of the node's image when it was asked again right before the
    /// patch (absent when it was not asked: the node was no longer stuck on a lost image).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) registry: Option<RegistrySaid>,
}

/// What the run did, as `--output json` prints it beside the plan.
#[derive(Serialize)]
pub(crate) struct Done {
    #[serde(rename = "applied")]
    pub(crate) nodes: Vec<Entry>,
    /// With `--wait`, once reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pools: Option<Vec<PoolWait>>,
    /// A read or write failed (exit status 2).
    #[serde(skip)]
    pub(crate) failed: bool,
    #[serde(skip)]
    pub(crate) interrupted: bool,
}

impl Done {
    /// 2 a read or write failed, 130 interrupted, 1 a person is needed (`attention`, or a
    /// pool did not finish), else 0.
    pub(crate) fn exit_status(&self, attention: bool) -> ExitCode {
        if self.failed {
            ExitCode::from(2)
        } else if self.interrupted {
            ExitCode::from(130)
        } else if attention || self.pools.iter().flatten().any(|p| !p.finished) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }

    /// The text summary: each node, then each pool waited for.
    pub(crate) fn summary(&self) -> String {
        let mut out = outcome::summary(&self.nodes);
        for p in self.pools.iter().flatten() {
            out.push_str(&format!("  pool {}: {}\n", p.pool, p.why));
        }
        out
    }
}

/// Carries out `plan`'s recoverable (and already cancelled) nodes, in the plan's order; with
/// `wait`, then follows their pools.
pub(crate) async fn run(
    client: &Client,
    plan: &Plan,
    timeout: Duration,
    wait: bool,
    ask: &mut RegistryAsk,
) -> Done {
    let clock = Clock::start();
    let todo: Vec<&NodePlan> = plan
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.diagnosis,
                Diagnosis::Recoverable(_) | Diagnosis::Cancelled { .. }
            )
        })
        .collect();
    let mut step = NodeStep {
        client,
        clock: &clock,
        plan,
        ask,
        timeout,
    };
    let ran = super::run(&mut step, &todo, &clock, words::NOTHING_TO_APPLY).await;
    let mut done = Done {
        failed: ran.applied.iter().any(|a| a.outcome == Outcome::Failed),
        nodes: ran.applied,
        pools: None,
        interrupted: ran.interrupted,
    };
    if wait && ran.through {
        // Every pool a node was recovered in.
        let pools: BTreeSet<&str> = (done.nodes.iter())
            .filter(|a| matches!(a.outcome, Outcome::Recovered | Outcome::MovedOn))
            .filter_map(|a| a.subject.pool.as_deref())
            .collect();
        let pools = until_ctrl_c(wait::pools(client, &clock, pools, timeout)).await;
        done.interrupted = pools.is_none();
        done.pools = Some(pools.unwrap_or_default());
    }
    done
}

struct NodeStep<'a> {
    client: &'a Client,
    clock: &'a Clock,
    plan: &'a Plan,
    ask: &'a mut RegistryAsk,
    timeout: Duration,
}

impl<'a> Step for NodeStep<'a> {
    type Item = &'a NodePlan;
    type Subject = Node;
    type Found = Found;

    fn entry(&self, item: &&NodePlan) -> Entry {
        Applied::new(Node {
            node: item.node.clone(),
            pool: item.pool.clone(),
        })
    }

    async fn turn(&mut self, item: &&'a NodePlan, _: &Cell<Stage>) -> Entry {
        let (clock, node) = (self.clock, item.node.as_str());
        let mut a = self.entry(item);
        let (fresh, uid) = match self.reread(node).await {
            Ok(read) => read,
            Err((outcome, why)) => return a.end(clock, outcome, why),
        };
        let replanned = self.replan(&fresh, node, &mut a).await;
        let marker = match replanned {
            None => return a.end(clock, Outcome::NothingToDo, words::NO_LONGER_STUCK.into()),
            Some(Diagnosis::Cancelled { marker, .. }) => {
                clock.line(words::already_cancelled(node));
                marker
            }
            Some(Diagnosis::Recoverable(r)) => {
                self.record(node, uid.as_deref(), &r, &mut a).await;
                a = match self.patch(node, &r, a).await {
                    Ok(a) => a,
                    Err(ended) => return ended,
                };
                r.marker
            }
            Some(other) => return a.stop(clock, words::changed(node, &other)),
        };
        match wait::node(self.client, clock, node, &marker, self.timeout).await {
            Ok((outcome, why)) => a.end(clock, outcome, why),
            Err(stop) => a.stop(clock, stop),
        }
    }

    fn interrupted(&self, _: &&NodePlan, _: Stage) -> String {
        words::INTERRUPTED.to_string()
    }
}

impl NodeStep<'_> {
    /// The node and what its plan rests on, read again, and the node's uid; or how the turn
    /// ends (the read failed, the node is gone).
    async fn reread(
        &self,
        node: &str,
    ) -> Result<(RecoverySnapshot, Option<String>), (Outcome, String)> {
        self.clock.line(words::rereading(node));
        let fresh = live::fresh_for(self.client, node)
            .await
            .map_err(|e| (Outcome::Failed, words::reread_failed(e)))?;
        let gone = || (Outcome::NothingToDo, words::GONE_WHEN_REREAD.to_string());
        let uid = fresh.nodes.first().ok_or_else(gone)?.uid.clone();
        Ok((fresh, uid))
    }

    /// The node planned again from `fresh`, its registry asked again; `None`: no longer stuck
    /// on a lost image. What the registry said goes into `a`.
    async fn replan(
        &mut self,
        fresh: &RecoverySnapshot,
        node: &str,
        a: &mut Entry,
    ) -> Option<Diagnosis> {
        let images = recovery::images_to_ask(fresh, None);
        for image in &images {
            self.clock.line(words::asking(node, image));
        }
        let (answers, _) = self.ask.answers(&images).await;
        let replanned = recovery::plan_node(fresh, node, &answers);
        a.found.registry = replanned.as_ref().and_then(|p| p.registry.clone());
        if let Some(said) = &a.found.registry {
            self.clock.line(words::registry_says(node, said));
        }
        replanned.map(|p| p.diagnosis)
    }

    /// What the patch is about to change, said and kept (the entry, an Event on the node).
    async fn record(&self, node: &str, uid: Option<&str>, r: &Recovery, a: &mut Entry) {
        self.clock
            .line(words::before_patch(node, &r.marker.annotations));
        a.found.recorded = Some(r.marker.annotations.clone());
        let note = words::event_note(node, r);
        let written =
            events::node_event(self.client.clone(), node, uid, REASON_RECOVERY, &note).await;
        let (line, event) = match written {
            Ok(name) => words::event_recorded(node, &name),
            Err(e) => words::event_not_recorded(node, e),
        };
        self.clock.line(line);
        a.found.event = Some(event);
    }

    /// The conditional patch; `Err`: the turn ended here.
    async fn patch(&self, node: &str, r: &Recovery, a: Entry) -> Result<Entry, Entry> {
        let clock = self.clock;
        let planned = self
            .plan
            .recoverable()
            .find(|(n, _)| n.node == node)
            .is_some_and(|(_, p)| p.patch == r.patch);
        clock.line(words::patching(node, &r.patch, planned));
        match live::patch_node(self.client, node, &r.patch).await {
            Ok(_) => {
                clock.line(words::patched(node, self.timeout));
                Ok(a)
            }
            Err(PatchError::Refused(message)) => Err(a.stop(clock, words::patch_refused(&message))),
            Err(PatchError::Rejected { code: 404, .. }) => Err(a.end(
                clock,
                Outcome::NothingToDo,
                words::DELETED_BEFORE_PATCH.into(),
            )),
            Err(e @ PatchError::Rejected { .. }) => {
                Err(a.end(clock, Outcome::Failed, words::patch_rejected(e)))
            }
            Err(e @ PatchError::Failed(_)) => {
                Err(a.end(clock, Outcome::Failed, words::patch_failed(e)))
            }
        }
    }
}
