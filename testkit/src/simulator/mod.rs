//! An MCO 4.20 simulator: the parts of the machine-config-operator that matter for MachineOSConfig
//! deletion, acting only through the real API server and the real registry, and writing only
//! objects a real 4.20 API server accepts (`tests/crds/`, written from openshift/api release-4.20's
//! published schema).
//!
//! Four polling loops, each level-triggered from what the API server shows:
//! - [`build`]: the machine-os-builder. Builds (MOSB, its Job, ConfigMaps and Secrets in
//!   `openshift-machine-config-operator` ([`jobs`]), and the pushed image) for each MOSC, shaped as
//!   4.20 writes them; MOSC status; rebuilds and rollbacks; and its delete handlers as measured
//!   on a real 4.20 builder: delete events handled [`SimConfig::delete_delay`] late, the
//!   MOSB-delete path deleting a gone MOSC's images (no in-use check), the MOSC-delete path
//!   (image first, then the MOSB, 5 retries) for MOSBs whose deletion was refused, images deleted
//!   by tag;
//! - [`nodes`]: the node controller, targeting nodes only once a Succeeded build for the pool's
//!   current rendered config matches the MOSC's image, honouring maxUnavailable, never reverting
//!   a node that is mid-update (the 4.20 bug);
//! - [`daemon`]: one machine-config-daemon per node, pulling the desired image from the registry;
//! - [`pools`]: MachineConfigPool status as MCO computes it, build waits and failures included.
//!
//! Pool membership everywhere is MCO's (`pkg/helpers`: [`crate::mco::primary_pool`]).
//!
//! Kubernetes' garbage collector is not simulated: the control plane runs the real one
//! (kube-controller-manager with only its garbage collector), which acts on the MOSBs'
//! `foregroundDeletion` finalizer and their ownerReference to the MOSC, and on the build Jobs'
//! ownerReference to their MOSB.
//!
//! This is test harness code, not product code: it shares nothing with the mosc-guard crate.

mod build;
mod daemon;
mod jobs;
mod nodes;
mod pools;

pub use jobs::{JOB_UID_ANNOTATION, MCO_NAMESPACE, digest_configmap_name, job_name};

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::Result;
use crate::registry_client::RegistryClient;

/// Timing and behaviour of the simulated MCO. Every test says which timing it runs at:
/// [`SimConfig::real_timing`] (also `Default`), the machine-os-builder's own timing, or
/// [`SimConfig::fast`] for suites that run many rollouts or faults (soak, chaos).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// How long a daemon waits (drain, reboot prep) before its first pull of a new image.
    pub pull_delay: Duration,
    /// Extra pull attempts after the first failed one (MCO: about 5 over ~75 s).
    pub pull_retries: u32,
    /// Pause between pull attempts.
    pub retry_interval: Duration,
    /// How often each loop reads the API server.
    pub poll_interval: Duration,
    /// How long a build runs between MOSB creation and its image being pushed (at least until
    /// the next second, so that buildEnd is later than buildStart). [`Simulator::set_build_delay`]
    /// changes it at run time. Keep it longer than [`SimConfig::delete_delay`], as every real
    /// build is: a same-name rebuild (a MOSC deleted and recreated, the rebuild annotation)
    /// pushes to the old build's tag, and a rebuild finished before the old build's delete event
    /// is handled would have its new image deleted by that tag.
    pub build_delay: Duration,
    /// How long after a MOSC or MOSB is gone from the API its delete event is handled: the
    /// machine-os-builder queues every event with its `UpdateDelay`, 5 s in 4.20.
    pub delete_delay: Duration,
    /// MCO 4.20's in-use check before it deletes a MOSB's image while the MOSC exists (on by
    /// default; off models a stale informer cache that misses the node).
    pub in_use_check: bool,
}

impl SimConfig {
    /// The real machine-os-builder's timing where a verdict can depend on it: delete events
    /// handled 5 s late, builds of 6 s (a real one takes minutes, 17-22 s with an instant
    /// builder pod; what matters is that it outlasts the delete delay). The node daemons stay
    /// quick (drain, reboot and rpm-ostree's ~75 s of retries take well under a second each),
    /// which only shortens a rollout.
    pub fn real_timing() -> Self {
        Self {
            build_delay: Duration::from_secs(6),
            delete_delay: Duration::from_secs(5),
            ..Self::fast()
        }
    }

    /// Everything in milliseconds (the harness's timing before the real builder was
    /// measured), delete events handled after 100 ms: for suites that run many rollouts.
    pub fn fast() -> Self {
        Self {
            pull_delay: Duration::from_millis(200),
            pull_retries: 3,
            retry_interval: Duration::from_millis(200),
            poll_interval: Duration::from_millis(100),
            build_delay: Duration::from_millis(300),
            delete_delay: Duration::from_millis(100),
            in_use_check: true,
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self::real_timing()
    }
}

/// What a test can switch while the simulator runs.
#[derive(Debug, Default)]
struct Knobs {
    /// Nodes whose daemon is frozen.
    held: HashSet<String>,
    /// Overrides [`SimConfig::build_delay`] for builds that finish from now on.
    build_delay: Option<Duration>,
    /// Builds that finish from now on fail instead of pushing an image.
    fail_builds: bool,
    /// MOSC delete events wait (a slow machine-os-builder); MOSB delete events do not.
    hold_cleanup: bool,
    /// Pools whose next nodes the node controller does not target (the gap between batches).
    held_pools: HashSet<String>,
    /// Writes the API server refused as invalid (422): the simulator must never make one.
    rejected: Vec<String>,
    /// MOSC delete events the build controller has not handled yet.
    pending_cleanups: usize,
}

/// What every loop shares.
#[derive(Clone)]
struct Ctx {
    client: kube::Client,
    registry: RegistryClient,
    cfg: SimConfig,
    knobs: Arc<Mutex<Knobs>>,
}

impl Ctx {
    fn knobs<T>(&self, read: impl FnOnce(&Knobs) -> T) -> T {
        match self.knobs.lock() {
            Ok(k) => read(&k),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    fn is_held(&self, node: &str) -> bool {
        self.knobs(|k| k.held.contains(node))
    }

    fn build_delay(&self) -> Duration {
        self.knobs(|k| k.build_delay.unwrap_or(self.cfg.build_delay))
    }

    /// Awaits one API write, remembering it if the API server found the object invalid.
    async fn write<T>(
        &self,
        what: &str,
        call: impl Future<Output = std::result::Result<T, kube::Error>>,
    ) -> std::result::Result<T, kube::Error> {
        let result = call.await;
        if let Err(kube::Error::Api(status)) = &result
            && status.code == 422
        {
            tracing::error!(
                "sim: the API server rejected {what} as invalid: {}",
                status.message
            );
            if let Ok(mut k) = self.knobs.lock() {
                k.rejected.push(format!("{what}: {}", status.message));
            }
        }
        result
    }
}

/// The running simulator; its loops stop when it is dropped.
pub struct Simulator {
    tasks: Vec<JoinHandle<()>>,
    knobs: Arc<Mutex<Knobs>>,
}

impl Simulator {
    /// Starts the simulator's loops on the current tokio runtime. `registry_host` (`127.0.0.1:PORT`)
    /// is the only registry it pushes to, pulls from or deletes in.
    pub fn start(client: kube::Client, registry_host: &str, cfg: SimConfig) -> Result<Self> {
        crate::init_tracing();
        let ctx = Ctx {
            client,
            registry: RegistryClient::new(registry_host)?,
            cfg,
            knobs: Arc::default(),
        };
        tracing::info!(
            "sim: MCO 4.20 simulator started (registry {registry_host}, {:?})",
            ctx.cfg
        );
        let tasks = vec![
            spawn_loop(
                "build",
                ctx.clone(),
                build::BuildController::new(ctx.clone()),
            ),
            spawn_loop(
                "node-controller",
                ctx.clone(),
                nodes::NodeController::new(ctx.clone()),
            ),
            spawn_loop("daemon", ctx.clone(), daemon::Daemons::new(ctx.clone())),
            spawn_loop(
                "pool-status",
                ctx.clone(),
                pools::PoolStatus::new(ctx.clone()),
            ),
        ];
        Ok(Self {
            tasks,
            knobs: ctx.knobs,
        })
    }

    fn knobs(&self, change: impl FnOnce(&mut Knobs)) {
        match self.knobs.lock() {
            Ok(mut k) => change(&mut k),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
    }

    /// Freezes `node`'s daemon: it does nothing (no pull, no state change) until released. The
    /// node controller still treats the node normally, so a held node can be caught mid-update.
    pub fn hold(&self, node: &str) {
        self.knobs(|k| {
            k.held.insert(node.to_owned());
        });
        tracing::info!("sim: holding daemon of {node}");
    }

    /// Lets `node`'s daemon act again.
    pub fn release(&self, node: &str) {
        self.knobs(|k| {
            k.held.remove(node);
        });
        tracing::info!("sim: releasing daemon of {node}");
    }

    /// The node controller targets no further node of `pool` (nodes already targeted carry on):
    /// holds open the gap between two batches of a rollout, with the pool not paused.
    pub fn hold_pool(&self, pool: &str) {
        self.knobs(|k| {
            k.held_pools.insert(pool.to_owned());
        });
        tracing::info!("sim: node controller holds pool {pool}");
    }

    /// Lets the node controller target nodes of `pool` again.
    pub fn release_pool(&self, pool: &str) {
        self.knobs(|k| {
            k.held_pools.remove(pool);
        });
        tracing::info!("sim: node controller releases pool {pool}");
    }

    /// Builds that finish from now on take `delay` (a slow build).
    pub fn set_build_delay(&self, delay: Duration) {
        self.knobs(|k| k.build_delay = Some(delay));
        tracing::info!("sim: builds now take {delay:?}");
    }

    /// Builds that finish from now on fail (`true`) or succeed again (`false`).
    pub fn fail_builds(&self, fail: bool) {
        self.knobs(|k| k.fail_builds = fail);
        tracing::info!("sim: builds now {}", if fail { "fail" } else { "succeed" });
    }

    /// Holds (`true`) or lets go (`false`) the MOSC-delete handler (the cleanup of the builds a
    /// deleted MOSC controls). The MOSB-delete handler keeps running: the images of MOSBs the
    /// garbage collector deleted still go.
    pub fn hold_cleanup(&self, hold: bool) {
        self.knobs(|k| k.hold_cleanup = hold);
        tracing::info!(
            "sim: cleanup after MachineOSConfig deletion {}",
            if hold { "held" } else { "released" }
        );
    }

    /// How many MOSC delete events the build controller has still to handle (queued for
    /// [`SimConfig::delete_delay`], held, or being retried).
    pub fn pending_cleanups(&self) -> usize {
        match self.knobs.lock() {
            Ok(k) => k.pending_cleanups,
            Err(poisoned) => poisoned.into_inner().pending_cleanups,
        }
    }

    /// Every write the API server refused as invalid so far (422), with its message. A
    /// faithful simulator makes none: tests assert this is empty.
    pub fn rejected_writes(&self) -> Vec<String> {
        match self.knobs.lock() {
            Ok(k) => k.rejected.clone(),
            Err(poisoned) => poisoned.into_inner().rejected.clone(),
        }
    }

    /// Stops all loops (also done on Drop).
    pub fn stop(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One reconcile pass over the current API state.
trait Reconciler: Send + 'static {
    fn sync(&mut self) -> impl Future<Output = Result<()>> + Send;
}

/// Runs `reconciler.sync()` every poll interval, logging (once per distinct message) its errors.
fn spawn_loop<R: Reconciler>(name: &'static str, ctx: Ctx, mut reconciler: R) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_error = String::new();
        loop {
            match reconciler.sync().await {
                Ok(()) => last_error.clear(),
                Err(e) => {
                    let msg = e.to_string();
                    if msg != last_error {
                        tracing::warn!("sim {name}: {msg} (will retry)");
                        last_error = msg;
                    }
                }
            }
            tokio::time::sleep(ctx.cfg.poll_interval).await;
        }
    })
}

/// Now as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

/// Whether a kube error is the API server's 404.
fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is the API server's 409 (conflict / already exists).
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
