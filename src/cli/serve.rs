//! `serve`: the flags validated into a [`ServeConfig`] (where the rules between flags live),
//! then the webhook wired from it: TLS, listeners, the caches or a dump, one engine and the
//! admission webhook over it, and in both modes the Lease-holder's finalizer controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::access::caches::Caches;
use crate::access::view::{ClusterView, ReleaseOverride, StaticView};
use crate::audit;
use crate::cli::args::{ClusterArgs, ServeArgs};
use crate::cli::dump::load_static;
use crate::cli::error::{CliError, ConfigError};
use crate::cli::output;
use crate::core::policy::PolicyMode;
use crate::decision::{DeletionMode, Enforcement, Engine};
use crate::defer::controller;
use crate::defer::leader::{self, LeaseSettings};
use crate::server::listener::{self, ConnectionLimits, Limits};
use crate::server::probes;
use crate::server::tls::{CertFiles, ReloadingResolver};
use crate::telemetry::events::Events;
use crate::telemetry::metrics::Metrics;
use crate::webhook::admission::{Admission, McoUsers};
use crate::webhook::routes;

/// Where `serve` reads the cluster from.
#[derive(Debug)]
pub enum ReadFrom {
    Live(ClusterArgs),
    /// A dump, for tests and demos: no finalizer controller, nothing written.
    Dump {
        path: PathBuf,
        allow_incomplete: bool,
    },
}

/// `serve`'s flags, validated: durations as durations, the access seam chosen, and the
/// combinations that cannot work refused before anything starts.
#[derive(Debug)]
pub struct ServeConfig {
    pub read_from: ReadFrom,
    pub policy: PolicyMode,
    pub deletion_mode: DeletionMode,
    pub enforcement: Enforcement,
    pub no_new_finalizers: bool,
    /// `--mco-user`: whose requests are admitted as MCO's own.
    pub mco_users: McoUsers,
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub certs: CertFiles,
    pub client_ca: Option<PathBuf>,
    pub tls_reload: Duration,
    pub limits: Limits,
    pub shutdown_delay: Duration,
    pub confirm_timeout: Duration,
    pub stale_after: Duration,
    pub fence_wait: Duration,
    pub confirm_batch_window: Duration,
    /// `--openshift-version`: overrides the cluster's release.
    pub release: Option<String>,
    /// The Lease, and this replica's identity in it and in Events.
    pub lease: LeaseSettings,
    /// `--registry-check-interval`; `None` when 0 (off).
    pub registry_check: Option<Duration>,
}

impl TryFrom<ServeArgs> for ServeConfig {
    type Error = ConfigError;

    fn try_from(args: ServeArgs) -> Result<Self, ConfigError> {
        let policy = PolicyMode::from(args.source.policy);
        let defer = args.deletion_mode == DeletionMode::Defer;
        if defer && policy == PolicyMode::InUse {
            return Err(ConfigError::DeferNeedsInFlight);
        }
        if defer && args.source.dump.from_dir.is_some() {
            return Err(ConfigError::DeferNeedsLiveCluster);
        }
        if defer && args.enforcement == Enforcement::Warn {
            return Err(ConfigError::WarnNeedsDenyMode);
        }
        if args.no_new_finalizers && !defer {
            tracing::info!(
                "--no-new-finalizers has no effect in deny mode: it never adds the finalizer"
            );
        }
        let secs = |s: u64| Duration::from_secs(s);
        let read_from = match args.source.dump.from_dir {
            Some(path) => ReadFrom::Dump {
                path,
                allow_incomplete: args.source.dump.allow_incomplete,
            },
            None => ReadFrom::Live(args.source.cluster),
        };
        Ok(ServeConfig {
            read_from,
            policy,
            deletion_mode: args.deletion_mode,
            enforcement: args.enforcement,
            no_new_finalizers: args.no_new_finalizers,
            mco_users: McoUsers::new(args.mco_users),
            listen: args.listen,
            metrics_listen: args.metrics_listen,
            certs: CertFiles {
                cert: args.tls_cert_file,
                key: args.tls_key_file,
            },
            client_ca: args.client_ca_file,
            tls_reload: secs(args.tls_reload_interval.max(1)),
            limits: Limits {
                request_timeout: secs(args.request_timeout.max(1)),
                shutdown_grace: secs(args.shutdown_grace),
                header_read_timeout: secs(10),
                connection: ConnectionLimits::default(),
            },
            shutdown_delay: secs(args.shutdown_delay),
            confirm_timeout: secs(args.confirm_timeout.max(1)),
            stale_after: secs(args.stale_after),
            fence_wait: Duration::from_millis(args.fence_wait_ms),
            confirm_batch_window: Duration::from_millis(args.confirm_batch_window_ms),
            release: args.source.openshift_version,
            lease: LeaseSettings::new(
                args.lease_namespace,
                args.lease_name,
                args.identity.unwrap_or_else(default_identity),
            ),
            registry_check: (args.registry_check_interval > 0)
                .then(|| secs(args.registry_check_interval)),
        })
    }
}

/// Runs the webhook until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> ExitCode {
    let result = match ServeConfig::try_from(args) {
        Ok(config) => run(config).await,
        Err(e) => Err(e.into()),
    };
    let result = result.inspect_err(|e| tracing::error!("{e}"));
    output::status(result.map(|()| ExitCode::SUCCESS))
}

/// The two listeners and their TLS: the webhook's (with the client CA, if any) and the ops
/// one's (probes and metrics; never a client certificate).
struct Listeners {
    webhook: (tokio::net::TcpListener, Arc<rustls::ServerConfig>),
    ops: (Option<tokio::net::TcpListener>, Arc<rustls::ServerConfig>),
}

async fn run(config: ServeConfig) -> Result<(), CliError> {
    // Every connection is a file descriptor: allow as many as the hard limit does.
    let open_files = listener::raise_open_files_limit();
    let resolver = ReloadingResolver::load(config.certs.clone())?;
    let plain_tls = Arc::new(resolver.server_config(None)?);
    let tls = match &config.client_ca {
        Some(ca) => Arc::new(resolver.server_config(Some(ca))?),
        None => Arc::clone(&plain_tls),
    };
    let bind =
        |addr, what| listener::bind(addr).map_err(|source| CliError::Listen { addr, what, source });
    let ops_listener = (config.metrics_listen)
        .map(|addr| bind(addr, " (--metrics-listen)"))
        .transpose()?;
    let listener = bind(config.listen, "")?;
    tracing::info!(
        listen = %config.listen,
        open_files_limit = open_files.unwrap_or_default(),
        policy = %config.policy,
        deletion_mode = ?config.deletion_mode,
        enforcement = ?config.enforcement,
        no_new_finalizers = config.no_new_finalizers,
        "mosc-guard serving"
    );
    let metrics = Arc::new(Metrics::default());
    let _reloader = resolver.spawn_reloader(config.tls_reload, Arc::clone(&metrics));
    let listeners = Listeners {
        webhook: (listener, tls),
        ops: (ops_listener, plain_tls),
    };
    match &config.read_from {
        ReadFrom::Live(cluster) => {
            let client = cluster.client().await?;
            let events = Events::new(client.clone(), &config.lease.identity);
            let caches = Caches::start(client.clone(), config.stale_after)
                .with_fence_wait(config.fence_wait);
            let mut admission = admission(&config, caches, metrics);
            admission.answers.events = Some(events.clone());
            run_live(&config, client, events, admission, listeners).await;
        }
        ReadFrom::Dump {
            path,
            allow_incomplete,
        } => {
            let snapshot = load_static(path, *allow_incomplete)?;
            let admission = admission(&config, StaticView(Arc::new(snapshot)), metrics);
            serve_and_drain(Arc::new(admission), listeners, &config, shutdown_signal()).await;
        }
    }
    Ok(())
}

/// The admission webhook deciding from `view` as the flags say: its engine is the one the
/// finalizer controller shares.
fn admission<V: ClusterView>(
    config: &ServeConfig,
    view: V,
    metrics: Arc<Metrics>,
) -> Admission<ReleaseOverride<V>> {
    let view = ReleaseOverride::new(view, config.release.clone());
    let engine = Engine::new(view, config.policy, metrics, config.confirm_timeout)
        .with_confirm_batch_window(config.confirm_batch_window);
    let mut admission = Admission::new(engine);
    admission.deletion_mode = config.deletion_mode;
    admission.answers.enforcement = config.enforcement;
    admission.mco_users = config.mco_users.clone();
    admission.no_new_finalizers = config.no_new_finalizers;
    admission
}

/// Serving from the caches, with the Lease holder's finalizer controller: in defer mode it adds
/// and removes the finalizer; in deny mode it only removes finalizers left from defer mode,
/// so switching modes strands no MachineOSConfig.
async fn run_live<V: ClusterView>(
    config: &ServeConfig,
    client: kube::Client,
    events: Events,
    admission: Admission<V>,
    listeners: Listeners,
) {
    let admission = Arc::new(admission);
    let shutdown = CancellationToken::new();
    let add = admission.adds_finalizers();
    // The registry audit: its own task, never on the admission path.
    let audit = config.registry_check.map(|interval| {
        let engine = admission.engine();
        tokio::spawn(audit::run(
            Arc::clone(&engine.view),
            Arc::clone(&engine.metrics),
            client.clone(),
            events.clone(),
            interval,
            shutdown.clone(),
        ))
    });
    let election = {
        let engine = Arc::clone(admission.engine());
        let metrics = Arc::clone(&engine.metrics);
        tokio::spawn(leader::run(
            client.clone(),
            config.lease.clone(),
            Arc::clone(&metrics),
            shutdown.clone(),
            move |term| {
                controller::run(
                    client.clone(),
                    Arc::clone(&engine),
                    events.clone(),
                    Arc::clone(&metrics),
                    add,
                    term,
                )
            },
        ))
    };
    let signal = shutdown.clone();
    serve_and_drain(admission, listeners, config, async move {
        shutdown_signal().await;
        // The controller stops and gives the Lease up at once; serving goes on.
        signal.cancel();
    })
    .await;
    // Stops the controller and gives the Lease up so another replica takes over at once.
    if tokio::time::timeout(Duration::from_secs(15), election)
        .await
        .is_err()
    {
        tracing::warn!("leader election did not stop within 15 s");
    }
    if let Some(audit) = audit {
        audit.abort();
    }
}

/// Serves the webhook, and probes and metrics on the ops listener if there is one, until
/// `signal`; then drains (`/readyz` 503 on both at once, connections still accepted for the
/// shutdown delay, in-flight requests finished). The ops listener answers until the webhook
/// server has stopped.
async fn serve_and_drain<V: ClusterView>(
    admission: Arc<Admission<V>>,
    listeners: Listeners,
    config: &ServeConfig,
    signal: impl std::future::Future<Output = ()>,
) {
    let Listeners {
        webhook: (listener, tls),
        ops: (ops_listener, ops_tls),
    } = listeners;
    let limits = &config.limits;
    let engine = Arc::clone(admission.engine());
    let readiness = routes::readiness(&engine);
    let ops_stop = CancellationToken::new();
    let ops = async {
        if let Some(ops_listener) = ops_listener {
            let app = routes::ops_router(engine, readiness.clone());
            listener::serve(ops_listener, ops_tls, app, limits, ops_stop.cancelled()).await;
        }
    };
    let app = routes::router(admission, limits.request_timeout, readiness.clone());
    let drained = probes::drain_after(signal, readiness.clone(), config.shutdown_delay);
    let main = async {
        listener::serve(listener, tls, app, limits, drained).await;
        ops_stop.cancel();
    };
    tokio::join!(main, ops);
}

/// The identity outside a pod: host name and process id.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mosc-guard".to_string());
    format!("{host}-{}", std::process::id())
}

/// Resolves on SIGTERM (kubelet stopping the pod) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received");
}

#[cfg(test)]
mod tests;
