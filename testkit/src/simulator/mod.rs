//! An MCO simulator: the parts of the machine-config-operator (and of the Machine API) that matter
//! for MachineOSConfig deletion, acting only through the real API server and the real registry,
//! and writing only objects a real API server accepts (`tests/crds/`, written from openshift/api's
//! published schema). It plays one z-stream of one release ([`ZStream`], [`Simulator::start_on`];
//! 4.20's late one by default) and can be switched to another mid-run, as MCO's operator rolls
//! out a new release's components during an upgrade ([`Simulator::roll_out_mco`]): what differs
//! between releases is in [`crate::release`].
//!
//! The build controller acts as the machine-os-builder's service account ([`crate::users::mob`],
//! [`crate::mco::MOB_USER`]), so every request it makes reaches the API server, and any webhook,
//! as MCO's; the other loops act as the admin. Every write the API server refuses is recorded:
//! as invalid or forbidden by RBAC ([`Simulator::rejected_writes`]: a faithful simulator makes
//! none) or by an admission webhook ([`Simulator::refused_by_webhook`]).
//!
//! Six loops, each level-triggered from what the API server shows, each pass one poll interval
//! after the last while it has work waiting on time or any loop wrote, else once something
//! changed ([`activity`]: a watched kind, a test's knob, or a second):
//! - [`build`]: the machine-os-builder. Builds (MOSB, its Job, ConfigMaps and Secrets in
//!   `openshift-machine-config-operator` ([`jobs`]), and the pushed image) for each MOSC, shaped as
//!   the played release writes them; the MOSC's current build named when a build starts, its image when it
//!   succeeds; superseded builds deleted when another starts or is reused
//!   (`deleteOtherBuildsForMachineOSConfig`); rebuilds, rollbacks, reuse of an existing build
//!   (whoever controls it) and 4.21's pre-built images; and its delete handlers as measured
//!   on a real 4.20 builder: delete events handled [`SimConfig::delete_delay`] late, the
//!   MOSB-delete path deleting a gone MOSC's images (no in-use check), the MOSC-delete path
//!   (image first, then the MOSB, retried while it fails) for MOSBs that survived, images deleted
//!   by tag; the cleanup by label (4.19, early 4.20-4.22 z-streams) and 4.23's in-use check on
//!   the build's pool;
//! - [`nodes`]: the node controller, targeting nodes only while the build of the pool's
//!   `spec.configuration` has Succeeded with the MOSC's image (`canLayeredContinue`), counting
//!   unavailable nodes against maxUnavailable and skipping unschedulable ones as MCO does
//!   ([`node_state`]), so a node mid-update is never reverted (the 4.20 bug) and a node stuck
//!   cordoned freezes its pool;
//! - [`daemon`]: one machine-config-daemon per node: Working, drained, the desired image pulled
//!   from the registry, rebooted (a new bootID), uncordoned and Done; or cordoned and Degraded
//!   with the played release's reason, retried until its target changes, and a target
//!   cancelled by hand completed with no reboot;
//! - [`drain`]: the drain controller, cordoning and uncordoning nodes as their daemons ask;
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

mod activity;
mod boot;
mod build;
mod candidates;
mod config;
mod ctx;
mod daemon;
mod drain;
mod jobs;
mod machines;
mod mcs;
mod node_state;
mod nodes;
mod pool_target;
mod pools;
mod reads;
mod reconcile;

pub use boot::{BootOutcome, FirstBoot};
pub use config::SimConfig;
pub use daemon::rpm_ostree_error;
pub use jobs::{JOB_UID_ANNOTATION, MCO_NAMESPACE, digest_configmap_name, job_name};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::Result;
use crate::controlplane::ControlPlane;
use crate::registry_client::RegistryClient;
pub use crate::release::{Release, ZStream};
use activity::Activity;
use ctx::{BUILDER, Ctx, Knobs};
use reads::Reads;
use reconcile::spawn_loop;

/// The name MCO gives the build of `mosc` for the rendered config `rendered` (`<mosc>-<hash of
/// the inputs>`: the MOSC's spec and the config).
pub fn build_name(mosc: &kube::api::DynamicObject, rendered: &str) -> String {
    build::mosb_name(
        mosc.metadata.name.as_deref().unwrap_or_default(),
        mosc,
        rendered,
    )
}

/// The running simulator; its loops stop when it is dropped.
pub struct Simulator {
    tasks: Vec<JoinHandle<()>>,
    knobs: Arc<Mutex<Knobs>>,
    activity: Activity,
    builder_kubeconfig: PathBuf,
}

impl Simulator {
    /// [`Simulator::start_on`] 4.20, the seed's release (the control plane's default
    /// ClusterVersion).
    pub async fn start(cp: &ControlPlane, registry_host: &str, cfg: SimConfig) -> Result<Self> {
        Self::start_on(Release::V4_20, cp, registry_host, cfg).await
    }

    /// Starts the simulator's loops on the current tokio runtime, behaving as `z_stream`'s MCO
    /// (the caller makes the ClusterVersion say so: [`crate::scenario::Cluster::seed_on`]).
    /// Gives the machine-os-builder its identity first ([`crate::users::mob::client`]; the namespace
    /// `openshift-machine-config-operator` must exist). `registry_host` (`127.0.0.1:PORT`) is
    /// the only registry it pushes to, pulls from or deletes in.
    pub async fn start_on(
        z_stream: impl Into<ZStream>,
        cp: &ControlPlane,
        registry_host: &str,
        cfg: SimConfig,
    ) -> Result<Self> {
        crate::init_tracing();
        let z_stream = z_stream.into();
        let (builder, builder_kubeconfig) = crate::users::mob::client(cp).await?;
        let knobs = Knobs {
            builder: Some(z_stream),
            controller: Some(z_stream),
            ..Knobs::default()
        };
        let ctx = Ctx {
            client: cp.client(),
            actor: "machine-config-controller",
            registry: RegistryClient::new(registry_host)?,
            cfg,
            knobs: Arc::new(Mutex::new(knobs)),
            activity: Activity::new(),
            reads: Reads::default(),
        };
        tracing::info!(
            "sim: MCO {z_stream} simulator started (registry {registry_host}, {:?})",
            ctx.cfg
        );
        let mob = ctx.acting_as(BUILDER, builder);
        let mut tasks = ctx.activity.watch(&cp.client());
        tasks.extend([
            spawn_loop("build", ctx.clone(), build::BuildController::new(mob)),
            spawn_loop(
                "node-controller",
                ctx.clone(),
                nodes::NodeController::new(ctx.clone()),
            ),
            spawn_loop(
                "daemon",
                ctx.clone(),
                daemon::Daemons::new(ctx.acting_as("machine-config-daemon", cp.client())),
            ),
            spawn_loop(
                "drain-controller",
                ctx.clone(),
                drain::DrainController::new(ctx.clone()),
            ),
            spawn_loop(
                "pool-status",
                ctx.clone(),
                pools::PoolStatus::new(ctx.clone()),
            ),
            spawn_loop(
                "machine-api",
                ctx.clone(),
                machines::MachineApi::new(ctx.acting_as("machine-api", cp.client())),
            ),
        ]);
        Ok(Self {
            tasks,
            knobs: ctx.knobs,
            activity: ctx.activity,
            builder_kubeconfig,
        })
    }

    /// From now on the drain controller, the node controller and the daemons play MCO's own
    /// delays ([`SimConfig::with_mco_node_delays`]): a test sets its cluster up quickly and
    /// plays the path it is about at MCO's pace.
    pub fn play_mco_node_delays(&self) {
        let delays = ctx::NodeDelays::of(&SimConfig::fast().with_mco_node_delays());
        self.knobs(|k| k.node_delays = Some(delays));
    }

    /// `node`'s daemon, at the end of its next update (rebooted or not, uncordoned), waits
    /// before it reports Done until [`Simulator::release_before_done`]: a test times another
    /// node's completion (the event that syncs its pool) with it.
    pub fn hold_before_done(&self, node: &str) {
        let node = node.to_owned();
        self.knobs(|k| {
            k.held_before_done.insert(node);
        });
    }

    /// Lets `node`'s daemon report Done ([`Simulator::hold_before_done`]).
    pub fn release_before_done(&self, node: &str) {
        self.knobs(|k| {
            k.held_before_done.remove(node);
        });
    }

    /// The machine-config-operator's pod runs on `node` from now on: the node controller defers
    /// it in the master pool while another candidate exists.
    pub fn set_operator_node(&self, node: &str) {
        let node = node.to_owned();
        self.knobs(|k| k.operator_node = Some(node));
    }

    /// The release the machine-os-builder plays now.
    pub fn openshift_release(&self) -> Release {
        self.z_stream().release
    }

    /// The z-stream the machine-os-builder plays now (its cleanups are the ones that differ).
    pub fn z_stream(&self) -> ZStream {
        self.read(|k| k.builder)
            .unwrap_or_else(|| Release::V4_20.late())
    }

    /// The z-stream the other MCO components (node controller, Machine Config Server) play now.
    pub fn controller_z_stream(&self) -> ZStream {
        self.read(|k| k.controller)
            .unwrap_or_else(|| Release::V4_20.late())
    }

    /// MCO's operator rolls out `z_stream`'s components: from the next pass every loop (the
    /// node controller, the Machine Config Server and the machine-os-builder) behaves as it.
    /// During an upgrade the previous release's components keep running until this happens.
    pub fn roll_out_mco(&self, z_stream: impl Into<ZStream>) {
        let z_stream = z_stream.into();
        let before = self.z_stream();
        self.knobs(|k| {
            k.controller = Some(z_stream);
            k.builder = Some(z_stream);
        });
        tracing::info!("sim: MCO's components roll out {z_stream} (were {before})");
    }

    /// Only the node controller and the Machine Config Server roll out `z_stream`: the new
    /// operator's sync reaches them before the machine-os-builder (operator.go's order), so for
    /// a while mid-upgrade the old builder runs beside the new controller.
    pub fn roll_out_controller(&self, z_stream: impl Into<ZStream>) {
        let z_stream = z_stream.into();
        self.knobs(|k| k.controller = Some(z_stream));
        tracing::info!(
            "sim: MCO's controller and server roll out {z_stream} (the builder still plays {})",
            self.z_stream()
        );
    }

    /// The machine-os-builder pod restarts: the delete events it had queued (and its retries)
    /// are lost, as a new informer lists what exists and raises no delete event for what is
    /// already gone; builds in flight go on (their Jobs run without it).
    pub fn restart_builder(&self) {
        self.knobs(|k| k.restart_builder = true);
        tracing::info!("sim: the machine-os-builder restarts");
    }

    /// A kubeconfig acting as the machine-os-builder (its service account's token), for a test
    /// that makes MCO's requests itself.
    pub fn builder_kubeconfig(&self) -> &Path {
        &self.builder_kubeconfig
    }

    /// Switches a knob, and wakes the loops waiting for a change.
    fn knobs(&self, change: impl FnOnce(&mut Knobs)) {
        match self.knobs.lock() {
            Ok(mut k) => change(&mut k),
            Err(poisoned) => change(&mut poisoned.into_inner()),
        }
        self.activity.changed();
    }

    /// Freezes `node`'s daemon before it changes anything on the machine: it may start an
    /// update (Working, and the node drained), then waits (no pull, no reboot, no Done or
    /// Degraded) until released; released, it starts over if the node's target changed
    /// meanwhile. The node controller still treats the node normally, so a held node can be
    /// caught mid-update, cordoned, as MCO's would be.
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

    /// Every write the API server refused as invalid (422) or RBAC forbade so far, with who
    /// made it and the message. A faithful simulator makes none: tests assert this is empty.
    pub fn rejected_writes(&self) -> Vec<String> {
        self.read(|k| k.rejected.clone())
    }

    /// Every request of MCO (the machine-os-builder above all: its deletions of builds) an
    /// admission webhook refused so far (a 4xx whose message says `admission webhook ... denied
    /// the request`), as `<who>: <what>: <message>`, once per attempt (a refused call is retried
    /// every pass). A guard that never stands in MCO's way leaves this empty.
    pub fn refused_by_webhook(&self) -> Vec<String> {
        self.read(|k| k.refused.clone())
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

    /// How many update passes of `node`'s daemon failed so far (each set it Degraded; the daemon
    /// tries again after a back-off, re-reading the node's annotations).
    pub fn failed_updates(&self, node: &str) -> usize {
        self.read(|k| k.failed_updates.get(node).copied().unwrap_or(0))
    }

    /// Makes the registry answer on `host` too (a [`crate::node_registry::SecureFace`] over its
    /// storage): a MachineOSConfig pushing to `host` is built, pulled and cleaned up through the
    /// registry, as MCO reaches a production registry by its name.
    pub fn registry_also_at(&self, host: &str) {
        self.knobs(|k| {
            if !k.registry_aliases.iter().any(|a| a == host) {
                k.registry_aliases.push(host.to_owned());
            }
        });
        tracing::info!("sim: the registry also answers as {host}");
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
