//! What the simulator's loops share: the knobs a test switches ([`Knobs`]), and each loop's
//! context ([`Ctx`]: its identity, the registry, the timing, the release it plays) with the one
//! write path every loop's API writes go through, which records what the API server refuses.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::activity::Activity;
use super::boot::FirstBoot;
use super::config::SimConfig;
use super::reads::Reads;
use crate::registry_client::RegistryClient;
use crate::release::{Release, ZStream};

/// What a test can switch while the simulator runs.
#[derive(Debug, Default)]
pub(super) struct Knobs {
    /// Nodes whose daemon is frozen.
    pub(super) held: HashSet<String>,
    /// Nodes whose daemon, at the end of an update (uncordoned), waits before it reports Done.
    pub(super) held_before_done: HashSet<String>,
    /// Overrides [`SimConfig::build_delay`] for builds that finish from now on.
    pub(super) build_delay: Option<Duration>,
    /// Builds that finish from now on fail instead of pushing an image.
    pub(super) fail_builds: bool,
    /// MOSC delete events wait (a slow machine-os-builder); MOSB delete events do not.
    pub(super) hold_cleanup: bool,
    /// Pools whose next nodes the node controller does not target (the gap between batches).
    pub(super) held_pools: HashSet<String>,
    /// Writes the API server refused as invalid (422) or RBAC forbade: the simulator must never
    /// make one.
    pub(super) rejected: Vec<String>,
    /// Requests an admission webhook refused, with who made them.
    pub(super) refused: Vec<String>,
    /// The release the machine-os-builder plays now.
    pub(super) builder: Option<ZStream>,
    /// The release the other MCO components (controller, server) play now.
    pub(super) controller: Option<ZStream>,
    /// The machine-os-builder restarts at its next pass (its queue and memory are lost).
    pub(super) restart_builder: bool,
    /// MOSC delete events the build controller has not handled yet.
    pub(super) pending_cleanups: usize,
    /// Machines whose first boot waits after fetching its Ignition, before pulling the image.
    pub(super) held_machines: HashSet<String>,
    /// Machine name -> its first boot so far.
    pub(super) boots: BTreeMap<String, FirstBoot>,
    /// Images (digested) the in-use check kept from deletion: on 4.23 once the MOSC is gone,
    /// leaked.
    pub(super) kept: Vec<String>,
    /// Node name -> how many of its daemon's update passes failed (each wrote Degraded).
    pub(super) failed_updates: BTreeMap<String, usize>,
    /// The node the machine-config-operator's pod runs on, which the node controller defers
    /// in the master pool (`filterControlPlaneCandidateNodes`); none by default.
    pub(super) operator_node: Option<String>,
    /// Replaces the configuration's drain delay, pool sync delay and drain check interval
    /// from now on ([`super::Simulator::play_mco_node_delays`]).
    pub(super) node_delays: Option<NodeDelays>,
    /// Other hosts the registry answers on (its secure face, same storage): images named there
    /// are pushed, read and deleted through the registry ([`super::Simulator::registry_also_at`]).
    pub(super) registry_aliases: Vec<String>,
}

/// The delays on a node's way through an update ([`SimConfig::drain_delay`],
/// [`SimConfig::pool_sync_delay`], [`SimConfig::drain_check_interval`], and the daemon's
/// queue: [`SimConfig::retry_interval`] doubling to [`SimConfig::retry_cap`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeDelays {
    pub(super) drain: Duration,
    pub(super) pool_sync: Duration,
    pub(super) drain_check: Duration,
    pub(super) queue_base: Duration,
    pub(super) queue_cap: Duration,
}

impl NodeDelays {
    pub(super) fn of(cfg: &SimConfig) -> Self {
        Self {
            drain: cfg.drain_delay,
            pool_sync: cfg.pool_sync_delay,
            drain_check: cfg.drain_check_interval,
            queue_base: cfg.retry_interval,
            queue_cap: cfg.retry_cap,
        }
    }
}

/// What every loop shares.
#[derive(Clone)]
pub(super) struct Ctx {
    /// The identity this loop acts as (the build controller's is the machine-os-builder's).
    pub(super) client: kube::Client,
    /// Who this loop is, in records of refused writes.
    pub(super) actor: &'static str,
    pub(super) registry: RegistryClient,
    pub(super) cfg: SimConfig,
    pub(super) knobs: Arc<Mutex<Knobs>>,
    pub(super) activity: Activity,
    pub(super) reads: Reads,
}

impl Ctx {
    /// The z-stream this loop's MCO component plays now (the builder's, or the controller's).
    pub(super) fn z_stream(&self) -> ZStream {
        let playing = if self.actor == BUILDER {
            self.knobs(|k| k.builder)
        } else {
            self.knobs(|k| k.controller)
        };
        playing.unwrap_or_else(|| Release::V4_20.late())
    }

    /// The release this loop's MCO component plays now.
    pub(super) fn release(&self) -> Release {
        self.z_stream().release
    }

    /// This context acting as `actor` with `client`.
    pub(super) fn acting_as(&self, actor: &'static str, client: kube::Client) -> Self {
        Self {
            client,
            actor,
            ..self.clone()
        }
    }

    /// Every object `api` lists, read again only if something changed ([`Reads`]).
    pub(super) async fn list<K>(&self, api: &kube::Api<K>) -> crate::Result<Vec<K>>
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        self.reads.list(&self.activity, self.actor, api).await
    }

    pub(super) fn knobs<T>(&self, read: impl FnOnce(&Knobs) -> T) -> T {
        match self.knobs.lock() {
            Ok(k) => read(&k),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    /// Whether an image on `host` is in the harness registry (its own host, or a face of it).
    pub(super) fn serves(&self, host: &str) -> bool {
        host == self.registry.host() || self.knobs(|k| k.registry_aliases.iter().any(|a| a == host))
    }

    pub(super) fn is_held(&self, node: &str) -> bool {
        self.knobs(|k| k.held.contains(node))
    }

    pub(super) fn update_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        match self.knobs.lock() {
            Ok(mut k) => change(&mut k),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
    }

    /// The node delays played now: the knob's, else the configuration's.
    pub(super) fn node_delays(&self) -> NodeDelays {
        self.knobs(|k| k.node_delays)
            .unwrap_or_else(|| NodeDelays::of(&self.cfg))
    }

    pub(super) fn build_delay(&self) -> Duration {
        self.knobs(|k| k.build_delay.unwrap_or(self.cfg.build_delay))
    }

    /// Awaits one API write, remembering it if the API server found the object invalid, RBAC
    /// forbade it, or an admission webhook refused it.
    pub(super) async fn write<T>(
        &self,
        what: &str,
        call: impl Future<Output = std::result::Result<T, kube::Error>>,
    ) -> std::result::Result<T, kube::Error> {
        self.activity.wrote();
        let result = call.await;
        if let Err(kube::Error::Api(status)) = &result {
            let record = format!("{}: {what}: {}", self.actor, status.message);
            match refusal(status.code, &status.message) {
                Some(Refusal::Invalid) => {
                    tracing::error!("sim: the API server rejected {record}");
                    self.update_knobs(|k| k.rejected.push(record));
                }
                Some(Refusal::Webhook) => {
                    tracing::info!("sim: an admission webhook refused {record}");
                    self.update_knobs(|k| k.refused.push(record));
                }
                None => {}
            }
        }
        result
    }
}

/// The build controller's actor name.
pub(super) const BUILDER: &str = "machine-os-builder";

/// Why the API server refused a request, where the simulator records it.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// Invalid (422), or forbidden by RBAC: a real cluster would not refuse MCO so.
    Invalid,
    /// An admission webhook denied it.
    Webhook,
}

/// Classifies a refused request by its status code and message (`None`: not recorded, e.g.
/// not found, a conflict, a quota, an admission policy, or a webhook that could not be called).
fn refusal(code: u16, message: &str) -> Option<Refusal> {
    if (400..500).contains(&code)
        && message.contains("admission webhook")
        && message.contains("denied the request")
    {
        Some(Refusal::Webhook)
    } else if message.contains("ValidatingAdmissionPolicy") {
        // An admission policy (the API server's own, not a webhook): neither an invalid object
        // nor a webhook's refusal.
        None
    } else if code == 422
        || (code == 403 && message.contains(" cannot ") && message.contains("User \""))
    {
        Some(Refusal::Invalid)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_apart_by_code_and_message() {
        let denied = "admission webhook \"deletions.mosc-guard.dev\" denied the request: no";
        assert_eq!(refusal(403, denied), Some(Refusal::Webhook));
        assert_eq!(refusal(400, denied), Some(Refusal::Webhook));
        assert_eq!(refusal(422, "spec: Required value"), Some(Refusal::Invalid));
        let rbac =
            "jobs.batch is forbidden: User \"system:serviceaccount:a:b\" cannot create resource";
        assert_eq!(refusal(403, rbac), Some(Refusal::Invalid));
        let quota = "jobs.batch \"build-x\" is forbidden: exceeded quota: no-build-jobs";
        assert_eq!(refusal(403, quota), None);
        let unreachable = "failed calling webhook \"deletions.mosc-guard.dev\": connection refused";
        assert_eq!(refusal(500, unreachable), None);
        assert_eq!(refusal(404, "not found"), None);
        let policy = "is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p' denied request";
        assert_eq!(refusal(422, policy), None);
        assert_eq!(refusal(403, policy), None);
    }
}
