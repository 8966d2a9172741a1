//! The waits of `recover --apply`: a cancelled node until its daemon's no-op update is done
//! ([`crate::core::recovery::progress`] says how far it is), and with `--wait` each pool a node
//! was recovered in until MCO finished it. Each wait names what it waits for, prints a line when
//! that changes, and past `--timeout` stops and reports: it never writes anything.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::Client;
use serde::Serialize;

use crate::access::live;
use crate::access::recovery::get_node;
use crate::core::recovery::pool::{PoolState, pool_state};
use crate::core::recovery::{Marker, Progress, progress};

use super::outcome::{Applied, Clock, Outcome, minutes};

/// How often a node is re-read while its daemon works.
const NODE_POLL: Duration = Duration::from_secs(1);
/// How often a pool is re-read while MCO rolls it.
const POOL_POLL: Duration = Duration::from_secs(5);

/// Waits until node `a.node`, cancelled as `marker` records, has finished its no-op update, or
/// MCO moved it on. Each poll reads the node and the pools, MachineOSConfigs and
/// MachineOSBuilds: a new target on a node still Degraded is MCO's only if it is what MCO's node
/// controller sends its pool now.
pub(super) async fn node(
    client: &Client,
    clock: &Clock,
    a: Applied,
    marker: &Marker,
    timeout: Duration,
) -> Applied {
    let name = a.node.clone();
    let mut watch = Watch::new(clock, format!("node {name}"), timeout, NODE_POLL);
    loop {
        let read = tokio::try_join!(get_node(client, &name), live::decision_objects(client));
        let seen = match read {
            Ok((Some(node), objects)) => match progress(&node, marker, &objects) {
                Progress::Recovered => {
                    let why = "recovered: Done, reason cleared, uncordoned by its daemon, same \
                               bootID (no reboot)"
                        .to_string();
                    return a.end(clock, Outcome::Recovered, why);
                }
                Progress::MovedOn {
                    desired_config,
                    desired_image,
                    degraded,
                } => {
                    let target = format!(
                        "desiredConfig={}, desiredImage={}",
                        desired_config.as_deref().unwrap_or("<none>"),
                        desired_image.as_deref().unwrap_or("<none>")
                    );
                    let why = if degraded {
                        format!(
                            "recovered: its daemon uncordoned it, and MCO's node controller sent \
                             it the pool's target ({target}) before the daemon reported Done; the \
                             daemon reports Done, then carries out that update"
                        )
                    } else {
                        format!(
                            "recovered: its daemon finished, and MCO has already sent it the \
                             pool's next target ({target})"
                        )
                    };
                    return a.end(clock, Outcome::MovedOn, why);
                }
                Progress::Retargeted {
                    desired_config,
                    desired_image,
                    state,
                } => {
                    let why = format!(
                        "its target changed (desiredConfig={}, desiredImage={}) while it is still \
                         {state}, and not to what MCO's node controller sends its pool now on an \
                         uncordoned node: not the no-op update expected; nothing more was written",
                        desired_config.as_deref().unwrap_or("<none>"),
                        desired_image.as_deref().unwrap_or("<none>")
                    );
                    let to_do = "find out who changed the node's desiredConfig/desiredImage \
                                 (oc get node -o yaml; the API server's audit log), then run \
                                 recover again: it plans the node as it is now";
                    return a.stop(clock, "retargeted", why, to_do);
                }
                Progress::Rebooted { was, now } => {
                    let why = format!(
                        "the node booted since the cancel (bootID {} -> {}): not the no-op update \
                         expected; nothing more was written",
                        was.as_deref().unwrap_or("<none>"),
                        now.as_deref().unwrap_or("<none>")
                    );
                    let to_do = "look at the node and its daemon's log (oc describe node; oc -n \
                                 openshift-machine-config-operator logs -l k8s-app=machine-config-daemon \
                                 -c machine-config-daemon --field-selector spec.nodeName=<node>)";
                    return a.stop(clock, "rebooted", why, to_do);
                }
                Progress::Waiting(waiting) => {
                    format!("waiting for its daemon: {}", waiting.join(", "))
                }
            },
            Ok((None, _)) => {
                let why = "the node was deleted while waiting for it".to_string();
                return a.stop(
                    clock,
                    "nodeGone",
                    why,
                    "nothing to recover on a deleted node",
                );
            }
            Err(e) => format!("could not read it ({e}); retrying"),
        };
        if !watch.again(seen).await {
            let why = format!(
                "not done after {}; still {}; nothing more was written (no uncordon, no state)",
                minutes(timeout),
                watch.last
            );
            let to_do = "look at the daemon's log on the node; run recover --apply again to keep \
                         waiting: it recognises the node as cancelled and does not patch it twice";
            return a.stop(clock, "timedOut", why, to_do);
        }
    }
}

/// One wait's bookkeeping: what it last saw (said once per change) and its deadline.
struct Watch<'c> {
    clock: &'c Clock,
    who: String,
    deadline: Instant,
    poll: Duration,
    last: String,
}

impl<'c> Watch<'c> {
    fn new(clock: &'c Clock, who: String, timeout: Duration, poll: Duration) -> Self {
        Watch {
            clock,
            who,
            deadline: Instant::now() + timeout,
            poll,
            last: String::new(),
        }
    }

    /// Says `seen` if it differs from what was seen last; then `false` once the deadline has
    /// passed, else waits for the next poll and returns `true`.
    async fn again(&mut self, seen: String) -> bool {
        if self.last != seen {
            self.clock.line(format!("{}: {seen}", self.who));
            self.last = seen;
        }
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.poll.min(self.deadline - now)).await;
        true
    }
}

/// What became of one pool under `--wait`, as `--output json` prints it under `pools`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PoolWait {
    pub(crate) pool: String,
    /// `updated`, `rolloutResumed`, `timedOut` or `gone`.
    pub(crate) outcome: &'static str,
    #[serde(skip)]
    pub(crate) finished: bool,
    pub(crate) why: String,
}

/// `--wait`: every pool a node was recovered in, one after the other.
pub(super) async fn pools(
    client: &Client,
    clock: &Clock,
    nodes: &[Applied],
    timeout: Duration,
) -> Vec<PoolWait> {
    let pools: BTreeSet<&str> = nodes
        .iter()
        .filter(|a| matches!(a.outcome, Outcome::Recovered | Outcome::MovedOn))
        .filter_map(|a| a.pool.as_deref())
        .collect();
    let mut out = Vec::new();
    for pool in pools {
        out.push(one_pool(client, clock, pool, timeout).await);
    }
    out
}

async fn one_pool(client: &Client, clock: &Clock, pool: &str, timeout: Duration) -> PoolWait {
    let mut watch = Watch::new(clock, format!("pool {pool}"), timeout, POOL_POLL);
    let end = |outcome: &'static str, finished: bool, why: String| {
        clock.line(format!("pool {pool}: {why}"));
        PoolWait {
            pool: pool.to_string(),
            outcome,
            finished,
            why,
        }
    };
    loop {
        let seen = match live::decision_objects(client).await {
            Ok(objects) => match objects.pools.iter().find(|p| p.name() == pool) {
                None => return end("gone", false, "the pool was deleted".to_string()),
                Some(p) => {
                    match pool_state(p, &objects.machine_os_configs, &objects.machine_os_builds) {
                        PoolState::Finished(outcome, why) => return end(outcome, true, why),
                        PoolState::Waiting(what) => what,
                    }
                }
            },
            Err(e) => format!("could not read it ({e}); retrying"),
        };
        if !watch.again(seen).await {
            let why = format!(
                "not finished after {}; last seen: {}",
                minutes(timeout),
                watch.last
            );
            return end("timedOut", false, why);
        }
    }
}
