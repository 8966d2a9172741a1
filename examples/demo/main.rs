//! `make demo`: the report's scenario played the way an admin would, narrated on stdout.
//!
//! A real kube-apiserver + etcd, a real registry and the MCO simulator (on 4.20) from the test kit
//! (`testkit/`), with a `worker` pool of 3 nodes. The admin opts the pool into image mode,
//! waits for the build and deletes the MachineOSConfig while the first node is updating to its
//! image (the simulator holds that node mid-update, so every run has the same timing).
//!
//! - `GUARD=on` (default): mosc-guard runs and is registered as the validating webhook. The
//!   premature delete is denied; after the rollout the same delete succeeds and the pool leaves
//!   image mode without ever degrading. Exit 0 only if all of that happened.
//! - `GUARD=defer`: mosc-guard in defer mode (validating + mutating webhooks, finalizer
//!   controller). The premature delete is accepted with a warning; the MachineOSConfig stays
//!   Terminating while the rollout finishes, then goes, and the pool never degrades.
//! - `GUARD=off`: no guard. The delete succeeds, MCO deletes the image, the node fails
//!   "manifest unknown" and the pool goes NodeDegraded; then the admin heals it with
//!   `mosc-guard recover` (the plan, then `--apply --wait`). Exit 0 only if that reproduced and
//!   the pool recovered (the node back without a reboot, the pool Updated).
//! - Anything else: usage error, exit 2.
//!
//! The harness's logs stay off the screen unless `RUST_LOG` is set (they go to stderr then).
//! The guard binary must be built first (`cargo build --bin mosc-guard`), or named by
//! `MOSC_GUARD_BIN`, see `testkit::guard::GuardBin::from_env`.
//!
//! The story in modules: [`scenario`] (steps 1-4, the same in every mode), then how it ends:
//! [`guarded`], [`deferred`], [`unguarded`] (and its way back, [`recovery`]); [`cluster_state`] (what the story checks on the
//! cluster), [`narrate`] (kubectl and the pool as an admin sees them), [`pool_watch`] (every
//! state the pool had).

mod cluster_state;
mod deferred;
mod guarded;
mod narrate;
mod pool_watch;
mod recovery;
mod scenario;
mod unguarded;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use testkit::guard::GuardBin;
use testkit::node_registry::SecureFace;
use testkit::scenario::{Cluster, wait_for};
use testkit::webhooks::{register_mutating_webhook, register_validating_webhook};

use cluster_state::pool_settled;
use narrate::{heading, kubectl, note, pool_line};
use pool_watch::PoolWatch;

/// Bound of every wait; a passing run needs a few seconds per step at most.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
const POOL: &str = "worker";
const NODE_COUNT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    On,
    Defer,
    Off,
}

fn main() -> ExitCode {
    let mode = match std::env::var("GUARD") {
        Err(std::env::VarError::NotPresent) => Mode::On,
        Ok(v) if v == "on" => Mode::On,
        Ok(v) if v == "off" => Mode::Off,
        Ok(v) if v == "defer" => Mode::Defer,
        other => {
            let got = other.map_or_else(|e| e.to_string(), |v| format!("GUARD={v:?}"));
            eprintln!(
                "usage: make demo [GUARD=on|defer|off]   (or: GUARD=... cargo run --example demo)\n\
                 GUARD=on (default) plays the scenario with mosc-guard denying the early delete, \
                 GUARD=defer with mosc-guard deferring it, GUARD=off without mosc-guard (then \
                 heals the pool with mosc-guard recover); got {got}"
            );
            return ExitCode::from(2);
        }
    };
    init_logging();
    let runtime = match testkit::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    // On Ctrl-C the scenario future is dropped, which stops every server it started.
    let result = runtime.block_on(async {
        tokio::select! {
            r = run(mode) => r,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    });
    drop(runtime);
    let took = started.elapsed().as_secs_f64();
    match result {
        Ok(Outcome { problems, summary }) if problems.is_empty() => {
            println!("\nVERDICT: PASS ({took:.1} s): {summary}");
            ExitCode::SUCCESS
        }
        Ok(Outcome { problems, .. }) => {
            println!("\nVERDICT: FAIL ({took:.1} s):");
            for p in problems {
                println!("  - {p}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("\nVERDICT: FAIL ({took:.1} s): the demo could not finish: {e}");
            println!(
                "  (RUST_LOG=info shows the harness's log; MOSC_GUARD_E2E_KEEP_DIRS=1 keeps server logs)"
            );
            ExitCode::FAILURE
        }
    }
}

/// The harness's tracing goes to stderr, off unless `RUST_LOG` says otherwise. Installed before
/// the harness's own `init_tracing`, which then finds a subscriber and does nothing.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .try_init();
}

/// How the scenario ended: empty `problems` means the expected story happened.
pub(crate) struct Outcome {
    pub(crate) problems: Vec<String>,
    pub(crate) summary: String,
}

impl Outcome {
    pub(crate) fn fail(problem: impl Into<String>) -> Self {
        Self {
            problems: vec![problem.into()],
            summary: String::new(),
        }
    }
}

async fn run(mode: Mode) -> testkit::Result<Outcome> {
    let (label, what) = match mode {
        Mode::On => ("on", "with mosc-guard"),
        Mode::Defer => ("defer", "with mosc-guard deferring the deletion"),
        Mode::Off => ("off", "without mosc-guard"),
    };
    println!(
        "mosc-guard demo (GUARD={label}): delete a MachineOSConfig while a node still needs its image, {what}"
    );
    // Fail before starting any server when the product binary is missing (GUARD=off runs its
    // `recover`).
    let bin = GuardBin::from_env()?;
    heading("Setup: kube-apiserver + etcd, a registry, the MCO 4.20 simulator, pool worker");
    let cluster = Cluster::seed(NODE_COUNT, testkit::simulator::SimConfig::fast()).await?;
    let watch = PoolWatch::start(cluster.client.clone());
    wait_for(
        || async { Ok(watch.synced().then_some(())) },
        STEP_TIMEOUT,
        "the pool watch to list the pool",
    )
    .await?;
    wait_for(
        || async { pool_settled(&cluster, None).await },
        STEP_TIMEOUT,
        "pool worker to report Updated before the scenario starts",
    )
    .await?;
    // The registry as nodes reach it on OpenShift (TLS, token auth, the ControllerConfig's pull
    // secret and CA, an ImageDigestMirrorSet): where `mosc-guard recover` (and the guard's
    // registry audit) ask whether an image is still served. Kept to the end of the story.
    let nodes_pull = SecureFace::for_nodes(&cluster.client, &cluster.registry).await?;
    note(&format!(
        "API server {}, registry {} (nodes reach it at https://{}: TLS, token auth, the \
         ControllerConfig's pull secret and CA, an ImageDigestMirrorSet), {NODE_COUNT} worker \
         nodes (MCO's timings shortened to ms)",
        cluster.cp.server(),
        cluster.registry.host(),
        nodes_pull.host()
    ));
    let guard = match mode {
        Mode::Off => None,
        Mode::On => {
            let guard = bin.serve(&cluster.cp).start().await?;
            register_validating_webhook(&cluster.cp, &guard).await?;
            note(&format!(
                "mosc-guard serving {}, registered as rendered from manifests/base",
                guard.validate_url()
            ));
            kubectl(
                &cluster.cp,
                &["get", "validatingwebhookconfiguration"],
                None,
            )
            .await?;
            Some(guard)
        }
        Mode::Defer => {
            // The Lease goes to `default`: this control plane has no mosc-guard namespace.
            let args = ["--deletion-mode", "defer", "--lease-namespace", "default"];
            let guard = bin.serve(&cluster.cp).args(&args).start().await?;
            register_validating_webhook(&cluster.cp, &guard).await?;
            register_mutating_webhook(&cluster.cp, &guard).await?;
            note(&format!(
                "mosc-guard --deletion-mode defer serving {}, both webhooks registered as rendered from manifests/overlays/defer",
                guard.base_url()
            ));
            kubectl(
                &cluster.cp,
                &[
                    "get",
                    "validatingwebhookconfiguration,mutatingwebhookconfiguration",
                ],
                None,
            )
            .await?;
            Some(guard)
        }
    };
    pool_line(&cluster.client).await?;
    let result = scenario::scenario(mode, &cluster, &watch, &bin).await;
    watch.stop();
    drop(nodes_pull);
    match (result, &guard) {
        (Err(e), Some(guard)) => Err(format!(
            "{e}\nlast lines of the mosc-guard log:\n{}",
            guard.log_tail(15)
        )
        .into()),
        (result, _) => result,
    }
}
