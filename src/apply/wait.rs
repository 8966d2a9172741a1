//! The waits of `recover --apply`: a cancelled node until its daemon's no-op update is done
//! ([`crate::core::recovery::progress`] says how far it is, [`words::seen`] what that comes
//! to), and with `--wait` each pool a node was recovered in until MCO finished it. Each wait
//! names what it waits for, prints a line when that changes, and past `--timeout` stops and
//! reports: it never writes anything.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::Client;
use serde::Serialize;

use crate::access::live;
use crate::access::recovery::get_node;
use crate::core::recovery::pool::{PoolState, pool_state};
use crate::core::recovery::words::apply::{self as words, Seen, Stop};
use crate::core::recovery::{Marker, progress};

use super::Clock;
use super::outcome::Outcome;

/// How often a node is re-read while its daemon works.
const NODE_POLL: Duration = Duration::from_secs(1);
/// How often a pool is re-read while MCO rolls it.
const POOL_POLL: Duration = Duration::from_secs(5);

/// Waits until node `name`, cancelled as `marker` records, has finished its no-op update, or
/// MCO moved it on (how, and why); or where it stopped. Each poll reads the node and the pools,
/// MachineOSConfigs and MachineOSBuilds: a new target on a node still Degraded is MCO's only if
/// it is what MCO's node controller sends its pool now.
pub(super) async fn node(
    client: &Client,
    clock: &Clock,
    name: &str,
    marker: &Marker,
    timeout: Duration,
) -> Result<(Outcome, String), Stop> {
    let mut watch = Watch::new(clock, format!("node {name}"), timeout, NODE_POLL);
    loop {
        let read = tokio::try_join!(get_node(client, name), live::decision_objects(client));
        let seen = match read {
            Ok((Some(node), objects)) => match words::seen(&progress(&node, marker, &objects)) {
                Seen::Recovered(why) => return Ok((Outcome::Recovered, why)),
                Seen::MovedOn(why) => return Ok((Outcome::MovedOn, why)),
                Seen::Stop(stop) => return Err(stop),
                Seen::Waiting(what) => what,
            },
            Ok((None, _)) => return Err(words::node_gone()),
            Err(e) => words::unread(e),
        };
        if !watch.again(seen).await {
            return Err(words::node_timed_out(timeout, &watch.last));
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

/// `--wait`: each of `pools`, one after the other.
pub(super) async fn pools(
    client: &Client,
    clock: &Clock,
    pools: BTreeSet<&str>,
    timeout: Duration,
) -> Vec<PoolWait> {
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
                None => return end("gone", false, words::POOL_GONE.to_string()),
                Some(p) => {
                    match pool_state(p, &objects.machine_os_configs, &objects.machine_os_builds) {
                        PoolState::Finished(outcome, why) => return end(outcome, true, why),
                        PoolState::Waiting(what) => what,
                    }
                }
            },
            Err(e) => words::unread(e),
        };
        if !watch.again(seen).await {
            return end(
                "timedOut",
                false,
                words::pool_timed_out(timeout, &watch.last),
            );
        }
    }
}
