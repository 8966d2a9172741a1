//! The waits of `recover --apply`: a cancelled node until its daemon's no-op update is done
//! ([`crate::core::recovery::progress`] says how far it is), and with `--wait` each pool a node
//! was recovered in until MCO finished it. Each wait names what it waits for, prints a line when
//! that changes, and past `--timeout` stops and reports: it never writes anything.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::access::live::LiveError;
use crate::access::recovery as live;
use crate::core::model::MachineOSConfig;
use crate::core::recovery::pool::{PoolState, pool_state};
use crate::core::recovery::{Marker, Progress, progress};

use super::outcome::{Applied, Clock, Outcome, minutes};

/// How often a node is re-read while its daemon works.
const NODE_POLL: Duration = Duration::from_secs(1);
/// How often a pool is re-read while MCO rolls it.
const POOL_POLL: Duration = Duration::from_secs(5);

/// Waits until node `a.node`, cancelled as `marker` records, has finished its no-op update.
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
        let seen = match live::get_node(client, &name).await {
            Ok(Some(node)) => match progress(&node, marker) {
                Progress::Recovered => {
                    let why = "recovered: Done, reason cleared, uncordoned by its daemon, same \
                               bootID (no reboot)"
                        .to_string();
                    return a.end(clock, Outcome::Recovered, why);
                }
                Progress::MovedOn {
                    desired_config,
                    desired_image,
                } => {
                    let why = format!(
                        "recovered: its daemon finished, and MCO has already sent it the pool's \
                         next target (desiredConfig={}, desiredImage={})",
                        desired_config.as_deref().unwrap_or("<none>"),
                        desired_image.as_deref().unwrap_or("<none>")
                    );
                    return a.end(clock, Outcome::MovedOn, why);
                }
                Progress::Retargeted {
                    desired_config,
                    desired_image,
                    state,
                } => {
                    let why = format!(
                        "its target changed (desiredConfig={}, desiredImage={}) while it is still \
                         {state}: MCO sends a new target only to a Done node, so this is not the \
                         no-op update expected; nothing more was written",
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
            Ok(None) => {
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
        let read = tokio::try_join!(live::get_pool(client, pool), config_of(client, pool));
        let seen = match read {
            Ok((None, _)) => return end("gone", false, "the pool was deleted".to_string()),
            Ok((Some(p), config)) => match pool_state(&p, config.as_deref()) {
                PoolState::Finished(outcome, why) => return end(outcome, true, why),
                PoolState::Waiting(what) => what,
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

/// The MachineOSConfig that targets `pool`, if any.
async fn config_of(client: &Client, pool: &str) -> Result<Option<String>, LiveError> {
    let api: Api<MachineOSConfig> = Api::all(client.clone());
    let configs = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(source) => {
            return Err(LiveError::List {
                what: "machineosconfigs",
                source,
            });
        }
    };
    Ok(configs
        .iter()
        .find(|m| m.pool_name() == pool)
        .map(|m| m.name().to_string()))
}
