//! An MCO 4.20 simulator: the parts of the machine-config-operator that matter for MachineOSConfig
//! deletion, acting only through the real API server and the real registry.
//!
//! Four polling loops, each level-triggered from what the API server shows:
//! - [`build`]: builds (MOSB + pushed image) for each MOSC, MOSC status, and the 4.20 cleanup on
//!   MOSC/MOSB deletion (images deleted with no in-use check once the MOSC is gone);
//! - [`gc`]: the garbage collector's part (there is no kube-controller-manager);
//! - [`nodes`]: the node controller, rolling `desiredImage`/`desiredConfig` honouring
//!   maxUnavailable, never reverting a node that is mid-update (the 4.20 bug);
//! - [`daemon`]: one machine-config-daemon per node, pulling the desired image from the registry;
//! - [`pools`]: MachineConfigPool status as MCO computes it.
//!
//! This is test harness code, not product code: it shares nothing with the mosc-guard crate.

mod build;
mod daemon;
mod gc;
mod nodes;
mod pools;

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Result;
use super::registry_client::RegistryClient;

/// Timing of the simulated MCO.
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
    /// How long a build runs between MOSB creation and its image being pushed.
    pub build_delay: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            pull_delay: Duration::from_millis(300),
            pull_retries: 4,
            retry_interval: Duration::from_millis(300),
            poll_interval: Duration::from_millis(100),
            build_delay: Duration::from_millis(300),
        }
    }
}

/// What every loop shares.
#[derive(Clone)]
struct Ctx {
    client: kube::Client,
    registry: RegistryClient,
    cfg: SimConfig,
    held: Arc<Mutex<HashSet<String>>>,
}

impl Ctx {
    fn is_held(&self, node: &str) -> bool {
        self.held.lock().map(|h| h.contains(node)).unwrap_or(false)
    }
}

/// The running simulator; its loops stop when it is dropped.
pub struct Simulator {
    tasks: Vec<JoinHandle<()>>,
    held: Arc<Mutex<HashSet<String>>>,
}

impl Simulator {
    /// Starts the simulator's loops on the current tokio runtime. `registry_host` (`127.0.0.1:PORT`)
    /// is the only registry it pushes to, pulls from or deletes in.
    pub fn start(client: kube::Client, registry_host: &str, cfg: SimConfig) -> Result<Self> {
        super::init_tracing();
        let ctx = Ctx {
            client,
            registry: RegistryClient::new(registry_host)?,
            cfg,
            held: Arc::default(),
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
            spawn_loop("gc", ctx.clone(), gc::GarbageCollector::new(ctx.clone())),
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
            held: ctx.held,
        })
    }

    /// Freezes `node`'s daemon: it does nothing (no pull, no state change) until released. The
    /// node controller still treats the node normally, so a held node can be caught mid-update.
    pub fn hold(&self, node: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(node.to_owned());
        }
        tracing::info!("sim: holding daemon of {node}");
    }

    /// Lets `node`'s daemon act again.
    pub fn release(&self, node: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(node);
        }
        tracing::info!("sim: releasing daemon of {node}");
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
