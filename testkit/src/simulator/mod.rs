//! An MCO simulator: the parts of the machine-config-operator (and of the Machine API) that matter
//! for MachineOSConfig deletion, acting only through the real API server and the real registry,
//! and writing only objects a real API server accepts (`tests/crds/`, written from openshift/api's
//! published schema). It plays one [`Release`] ([`Simulator::start_on`]; 4.20, the seed's, by
//! default): what differs between releases is in [`crate::release`].
//!
//! Five polling loops, each level-triggered from what the API server shows:
//! - [`build`]: the machine-os-builder. Builds (MOSB, its Job, ConfigMaps and Secrets in
//!   `openshift-machine-config-operator` ([`jobs`]), and the pushed image) for each MOSC, shaped as
//!   4.20 writes them; MOSC status; rebuilds and rollbacks; and its delete handlers as measured
//!   on a real 4.20 builder: delete events handled [`SimConfig::delete_delay`] late, the
//!   MOSB-delete path deleting a gone MOSC's images (no in-use check), the MOSC-delete path
//!   (image first, then the MOSB, 5 retries) for MOSBs whose deletion was refused, images deleted
//!   by tag; 4.19's cleanup by label and 4.23's in-use check on the build's pool;
//! - [`nodes`]: the node controller, targeting nodes only once a Succeeded build for the pool's
//!   current rendered config matches the MOSC's image, honouring maxUnavailable, never reverting
//!   a node that is mid-update (the 4.20 bug);
//! - [`daemon`]: one machine-config-daemon per node, pulling the desired image from the registry;
//! - [`pools`]: MachineConfigPool status as MCO computes it, build waits and failures included;
//! - [`machines`]: the Machine API provisioning Machines (Provisioning, Provisioned, Running) and
//!   their first boot: the Ignition the Machine Config Server serves ([`mcs`]: on 4.21 and later
//!   with the pool's layered image), the image pulled by digest, the Node registered, or a first
//!   boot that fails and leaves the Machine Provisioned with no Node.
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
mod config;
mod daemon;
mod jobs;
mod machines;
mod mcs;
mod nodes;
mod pools;

pub use config::SimConfig;
pub use jobs::{JOB_UID_ANNOTATION, MCO_NAMESPACE, digest_configmap_name, job_name};
pub use machines::{BootOutcome, FirstBoot};

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::Result;
use crate::registry_client::RegistryClient;
pub use crate::release::Release;

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
    /// Machines whose first boot waits after fetching its Ignition, before pulling the image.
    held_machines: HashSet<String>,
    /// Machine name -> its first boot so far.
    boots: BTreeMap<String, FirstBoot>,
    /// Images (digested) the in-use check kept from deletion: on 4.23 once the MOSC is gone,
    /// leaked.
    kept: Vec<String>,
}

/// What every loop shares.
#[derive(Clone)]
struct Ctx {
    client: kube::Client,
    registry: RegistryClient,
    cfg: SimConfig,
    release: Release,
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

    fn update_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        match self.knobs.lock() {
            Ok(mut k) => change(&mut k),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
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
    release: Release,
}

impl Simulator {
    /// [`Simulator::start_on`] 4.20, the seed's release (the control plane's default
    /// ClusterVersion).
    pub fn start(client: kube::Client, registry_host: &str, cfg: SimConfig) -> Result<Self> {
        Self::start_on(Release::V4_20, client, registry_host, cfg)
    }

    /// Starts the simulator's loops on the current tokio runtime, behaving as `release`'s MCO
    /// (the caller makes the ClusterVersion say so: [`crate::scenario::Cluster::seed_on`]).
    /// `registry_host` (`127.0.0.1:PORT`) is the only registry it pushes to, pulls from or
    /// deletes in.
    pub fn start_on(
        release: Release,
        client: kube::Client,
        registry_host: &str,
        cfg: SimConfig,
    ) -> Result<Self> {
        crate::init_tracing();
        let ctx = Ctx {
            client,
            registry: RegistryClient::new(registry_host)?,
            cfg,
            release,
            knobs: Arc::default(),
        };
        tracing::info!(
            "sim: MCO {release} simulator started (registry {registry_host}, {:?})",
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
            spawn_loop(
                "machine-api",
                ctx.clone(),
                machines::MachineApi::new(ctx.clone()),
            ),
        ];
        Ok(Self {
            tasks,
            knobs: ctx.knobs,
            release,
        })
    }

    /// The release this simulator plays.
    pub fn openshift_release(&self) -> Release {
        self.release
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
        self.read(|k| k.pending_cleanups)
    }

    /// Every write the API server refused as invalid so far (422), with its message. A
    /// faithful simulator makes none: tests assert this is empty.
    pub fn rejected_writes(&self) -> Vec<String> {
        self.read(|k| k.rejected.clone())
    }

    /// Machine `name`'s first boot, once its Ignition was fetched, holding after that fetch and
    /// before the image is pulled (the Node does not register meanwhile).
    pub fn hold_machine(&self, name: &str) {
        self.knobs(|k| {
            k.held_machines.insert(name.to_owned());
        });
        tracing::info!("sim: holding the first boot of machine {name}");
    }

    /// Lets machine `name`'s first boot go on.
    pub fn release_machine(&self, name: &str) {
        self.knobs(|k| {
            k.held_machines.remove(name);
        });
        tracing::info!("sim: releasing the first boot of machine {name}");
    }

    /// Machine `name`'s first boot, once it fetched its Ignition.
    pub fn first_boot(&self, name: &str) -> Option<FirstBoot> {
        self.read(|k| k.boots.get(name).cloned())
    }

    /// The digested images MCO's in-use check kept from deletion so far (on 4.23, after the
    /// MOSC is gone, they stay in the registry: leaked).
    pub fn kept_images(&self) -> Vec<String> {
        self.read(|k| k.kept.clone())
    }

    fn read<T>(&self, read: impl FnOnce(&Knobs) -> T) -> T {
        match self.knobs.lock() {
            Ok(k) => read(&k),
            Err(poisoned) => read(&poisoned.into_inner()),
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
