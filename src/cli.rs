//! Command line: `serve` (the webhook), `check` (the same verdict, offline or live) and
//! `certs` (a development serving certificate).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cert_expiry;
use crate::events::Events;
use crate::leader::{self, LeaseSettings};
use crate::metrics::Metrics;
use crate::policy::{self, Deletion, PolicyMode, TargetKind};
use crate::report::{self, Report};
use crate::review::{DeletionMode, Reviewer};
use crate::server::{self, Limits};
use crate::snapshot::Snapshot;
use crate::tls::{CertFiles, ReloadingResolver};
use crate::view::StaticView;
use crate::{cache, controller, dump, live, uninstall};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(
    name = "mosc-guard",
    version,
    about = "Keeps Image Mode pools from degrading when a MachineOSConfig or MachineOSBuild is deleted too early"
)]
pub struct Cli {
    /// Log format on stderr: text, or json (one object per line, for log collectors).
    #[arg(long, global = true, value_enum, env = "MOSC_GUARD_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once at start-up and matched once: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the admission webhook (HTTPS: /validate, /healthz, /readyz, /metrics).
    Serve(ServeArgs),
    /// Say whether deleting a MachineOSConfig or MachineOSBuild is safe now.
    /// Exit status: 0 safe, 1 would be blocked, 2 error.
    Check(CheckArgs),
    /// Write a throwaway CA and a serving certificate for the webhook's Service (clusters
    /// without service-ca or cert-manager, local runs); print the caBundle.
    /// Exit status: 0 written, 2 error.
    Certs(crate::certs::CertsArgs),
    /// Remove mosc-guard's finalizer from every MachineOSConfig (uninstalling defer mode).
    /// Deletions still deferred are kept unless --force.
    /// Exit status: 0 none left, 1 some kept, 2 error (an object that could not be released
    /// is named with the reason; the others are still released).
    ReleaseFinalizers(ReleaseArgs),
}

/// Which cluster to talk to.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

impl ClusterArgs {
    /// A client for the kubeconfig and context given (or inferred).
    async fn client(&self) -> Result<kube::Client, String> {
        live::client(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(|e| e.to_string())
    }
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Also release deletions that nodes still need (the pool may degrade).
    #[arg(long)]
    pub force: bool,
}

/// Where the cluster's objects come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Read objects from YAML/JSON files below DIR (a must-gather, `oc get -o yaml`
    /// output) instead of a live cluster.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kubeconfig", "context"])]
    pub from_dir: Option<PathBuf>,
    /// With --from-dir: decide on what could be read even when a file that holds Nodes, pools,
    /// MachineOSConfigs or MachineOSBuilds could not be read whole (or the dump has nodes but
    /// no pools), listing what could not. Without it such a dump is an error (exit 2).
    #[arg(long, requires = "from_dir")]
    pub allow_incomplete: bool,
    /// in-flight: block while a node has not reached an image of the object;
    /// in-use: also while a node runs one (a settled pool then needs the override).
    #[arg(long, value_enum, default_value_t = PolicyMode::InFlight)]
    pub policy: PolicyMode,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// PEM certificate chain, re-read when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: PathBuf,
    /// PEM private key, re-read when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_key_file: PathBuf,
    /// PEM CA certificate(s): on --listen, require a client certificate this CA signed (the
    /// API server's, given by its --admission-control-config-file); a caller without one fails
    /// the TLS handshake. Needs --metrics-listen, since kubelet's probes and Prometheus cannot
    /// present one.
    #[arg(long, value_name = "FILE", requires = "metrics_listen")]
    pub client_ca_file: Option<PathBuf>,
    /// Also serve /healthz, /readyz and /metrics (HTTPS, same certificate, no client
    /// certificate) on this address, so probes and monitoring need not reach the webhook port.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub tls_reload_interval: u64,
    /// Deadline for one request, in seconds; keep it below the webhook's timeoutSeconds.
    #[arg(long, default_value_t = 8, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// Deadline for the fresh read that confirms an allow, in seconds.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub confirm_timeout: u64,
    /// Seconds the server keeps accepting connections after SIGTERM, with /readyz answering
    /// 503, so the endpoint is removed from the Service before the listener closes (keep the
    /// pod's terminationGracePeriodSeconds above this plus --shutdown-grace).
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub shutdown_delay: u64,
    /// Seconds in-flight requests get to finish once the server stopped accepting.
    #[arg(long, default_value_t = 20, value_name = "SECONDS")]
    pub shutdown_grace: u64,
    /// Seconds a cache's watch may fail continuously before /readyz answers 503 naming it
    /// (it recovers on its own when the watch does).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub stale_after: u64,
    /// Milliseconds a confirming read waits for the node cache to catch up with the API
    /// server before it also lists every node (the first to finish answers; see
    /// docs/design.md). 0 lists at once, as a small cluster may prefer.
    #[arg(long, default_value_t = 100, value_name = "MILLISECONDS")]
    pub fence_wait_ms: u64,
    /// deny: refuse a MachineOSConfig deletion while nodes need its images;
    /// defer: accept it and hold the object with a finalizer until the rollout settles
    /// (needs the mutating webhook, policy in-flight and a live cluster).
    #[arg(long, value_enum, default_value_t = DeletionMode::Deny)]
    pub deletion_mode: DeletionMode,
    /// Defer mode: add no finalizers (draining before an uninstall); deferred deletions
    /// still complete.
    #[arg(long)]
    pub no_new_finalizers: bool,
    /// Namespace of the leader-election Lease (defer mode).
    #[arg(long, env = "POD_NAMESPACE", default_value = "mosc-guard")]
    pub lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "mosc-guard")]
    pub lease_name: String,
    /// This replica's identity in the Lease and in Events (default: $POD_NAME, else the
    /// host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// machineosconfig/NAME (or mosc/NAME, or NAME) or machineosbuild/NAME (or mosb/NAME).
    pub target: String,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Parses a `check` target.
pub fn parse_target(target: &str) -> Result<(TargetKind, &str), String> {
    let (kind, name) = match target.split_once('/') {
        None => (TargetKind::MachineOSConfig, target),
        Some((kind, name)) => {
            let kind = match kind.to_ascii_lowercase().as_str() {
                "machineosconfig" | "machineosconfigs" | "mosc" => TargetKind::MachineOSConfig,
                "machineosbuild" | "machineosbuilds" | "mosb" => TargetKind::MachineOSBuild,
                other => {
                    return Err(format!(
                        "unknown kind {other:?}: expected machineosconfig/NAME, mosc/NAME, machineosbuild/NAME or mosb/NAME"
                    ));
                }
            };
            (kind, name)
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!(
            "invalid target {target:?}: expected KIND/NAME or NAME"
        ));
    }
    Ok((kind, name))
}

/// Runs `certs`; returns the exit status (0 written, 2 error). Files are written before
/// anything is printed, so a failed write prints no caBundle.
pub fn certs(args: crate::certs::CertsArgs) -> ExitCode {
    use std::io::Write;
    let written = crate::certs::run(&args)
        .map_err(|e| e.to_string())
        .and_then(|out| {
            std::io::stdout()
                .lock()
                .write_all(out.as_bytes())
                .map_err(|e| format!("writing to stdout: {e}"))
        });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs `check`; returns the exit status (0 safe, 1 blocked, 2 error).
pub async fn check(args: CheckArgs) -> ExitCode {
    match run_check(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_check(args: &CheckArgs) -> Result<bool, String> {
    let (kind, name) = parse_target(&args.target)?;
    let (snapshots, notes, source) = match &args.source.from_dir {
        Some(dir) => {
            let loaded = read_dump(dir, args.source.allow_incomplete)?;
            let mut notes = loaded.warnings.clone();
            notes.extend(
                loaded
                    .incomplete
                    .iter()
                    .map(|i| format!("not read whole: {i}")),
            );
            notes.extend(loaded.variant_note());
            for n in &notes {
                eprintln!("warning: {n}");
            }
            let snapshots: Vec<Snapshot> = loaded.snapshots().cloned().collect();
            (snapshots, notes, dir.display().to_string())
        }
        None => {
            let client = args.source.cluster.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await.map_err(|e| e.to_string())?;
            let notes: Vec<String> = missing
                .iter()
                .map(|m| format!("the cluster does not serve {m}; treated as empty"))
                .collect();
            for n in &notes {
                eprintln!("warning: {n}");
            }
            (vec![snapshot], notes, "the cluster".to_string())
        }
    };
    // Where copies of an object disagree, the most cautious verdict over the combinations.
    let verdicts = snapshots.iter().filter_map(|snapshot| {
        let target = find(snapshot, kind, name)?;
        Some(policy::evaluate(snapshot, target, args.source.policy))
    });
    let mut verdict: Option<policy::Verdict> = None;
    for v in verdicts {
        let refused = !v.allowed;
        if verdict.is_none() || refused {
            verdict = Some(v);
        }
        if refused {
            break;
        }
    }
    let verdict = verdict.ok_or_else(|| {
        let api = format!("{}s.", kind.cli_name());
        let hint = notes
            .iter()
            .find(|n| n.contains(&api))
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        format!("{} \"{name}\" not found in {source}{hint}", kind.cli_name())
    })?;
    match args.output {
        Output::Text => println!("{}", report::text(&verdict)),
        Output::Json => {
            let json = serde_json::to_string_pretty(&Report::new(&verdict, notes))
                .map_err(|e| format!("encoding the report: {e}"))?;
            println!("{json}");
        }
    }
    Ok(verdict.allowed)
}

/// Reads a dump; one that could not be read whole is an error unless `allow_incomplete`.
fn read_dump(dir: &Path, allow_incomplete: bool) -> Result<dump::Loaded, String> {
    let loaded = dump::load_dir(dir).map_err(|e| e.to_string())?;
    if loaded.incomplete.is_empty() || allow_incomplete {
        return Ok(loaded);
    }
    let mut msg = format!(
        "{} is incomplete, so no verdict can say a deletion is safe; what could not be read:",
        dir.display()
    );
    for i in &loaded.incomplete {
        msg.push_str("\n  ");
        msg.push_str(i);
    }
    msg.push_str("\nCollect it again (oc adm must-gather, or oc get ... -o yaml), or pass --allow-incomplete to decide on what could be read.");
    Err(msg)
}

fn find<'a>(snapshot: &'a Snapshot, kind: TargetKind, name: &str) -> Option<Deletion<'a>> {
    match kind {
        TargetKind::MachineOSConfig => snapshot
            .machine_os_config(name)
            .map(Deletion::MachineOSConfig),
        TargetKind::MachineOSBuild => snapshot
            .machine_os_build(name)
            .map(Deletion::MachineOSBuild),
    }
}

/// Runs the webhook until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> ExitCode {
    match run_serve(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_serve(args: ServeArgs) -> Result<(), String> {
    let defer = args.deletion_mode == DeletionMode::Defer;
    if args.no_new_finalizers && !defer {
        tracing::info!(
            "--no-new-finalizers has no effect in deny mode: it never adds the finalizer"
        );
    }
    if defer && args.source.policy == PolicyMode::InUse {
        return Err("--deletion-mode defer needs --policy in-flight: under in-use a settled pool's \
                    MachineOSConfig would never be released (its nodes run the image until it is deleted)"
            .into());
    }
    if defer && args.source.from_dir.is_some() {
        return Err("--deletion-mode defer needs a live cluster (the finalizer controller writes to it), not --from-dir".into());
    }
    let resolver = ReloadingResolver::load(CertFiles {
        cert: args.tls_cert_file.clone(),
        key: args.tls_key_file.clone(),
    })
    .map_err(|e| e.to_string())?;
    let plain_tls = Arc::new(resolver.server_config().map_err(|e| e.to_string())?);
    let tls = match &args.client_ca_file {
        Some(ca) => Arc::new(
            resolver
                .server_config_with_client_ca(ca)
                .map_err(|e| e.to_string())?,
        ),
        None => Arc::clone(&plain_tls),
    };
    let ops_listener = match args.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("listening on {addr} (--metrics-listen): {e}"))?,
        ),
        None => None,
    };
    let _reloader = resolver.spawn_reloader(Duration::from_secs(args.tls_reload_interval.max(1)));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", args.listen))?;
    tracing::info!(
        listen = %args.listen,
        policy = %args.source.policy,
        deletion_mode = ?args.deletion_mode,
        no_new_finalizers = args.no_new_finalizers,
        "mosc-guard serving"
    );
    let limits = Limits {
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        header_read_timeout: Duration::from_secs(10),
        connection: server::ConnectionLimits::default(),
    };
    let shutdown_delay = Duration::from_secs(args.shutdown_delay);
    let metrics = Arc::new(Metrics::default());
    let _expiry_gauge = cert_expiry::spawn_gauge(
        Arc::clone(&resolver),
        Arc::clone(&metrics),
        Duration::from_secs(args.tls_reload_interval.max(1)),
    );
    let confirm = Duration::from_secs(args.confirm_timeout.max(1));
    let Some(dir) = &args.source.from_dir else {
        let client = args.source.cluster.client().await?;
        let identity = args.identity.clone().unwrap_or_else(default_identity);
        let events = Events::new(client.clone(), &identity);
        let mut reviewer = Reviewer::new(
            cache::Caches::start(client.clone(), Duration::from_secs(args.stale_after))
                .with_fence_wait(Duration::from_millis(args.fence_wait_ms)),
            args.source.policy,
            Arc::clone(&metrics),
            confirm,
        )
        .with_deletion_mode(args.deletion_mode)
        .with_events(events.clone());
        if args.no_new_finalizers {
            reviewer = reviewer.without_new_finalizers();
        }
        let reviewer = Arc::new(reviewer);
        let shutdown = CancellationToken::new();
        // In both modes the Lease holder runs the finalizer controller: in defer mode it adds and
        // releases the finalizer; in deny mode it only releases finalizers left from defer mode,
        // so switching modes strands no MachineOSConfig.
        let election = {
            let settings = LeaseSettings::new(
                args.lease_namespace.clone(),
                args.lease_name.clone(),
                identity,
            );
            let (reviewer, metrics, stop) = (
                Arc::clone(&reviewer),
                Arc::clone(&metrics),
                shutdown.clone(),
            );
            let add = reviewer.adds_finalizers();
            tokio::spawn(leader::run(
                client.clone(),
                settings,
                Arc::clone(&metrics),
                stop,
                move |term| {
                    controller::run(
                        client.clone(),
                        Arc::clone(&reviewer),
                        events.clone(),
                        Arc::clone(&metrics),
                        add,
                        term,
                    )
                },
            ))
        };
        let signal = shutdown.clone();
        serve_and_drain(
            reviewer,
            (listener, tls),
            (ops_listener, plain_tls),
            &limits,
            shutdown_delay,
            async move {
                shutdown_signal().await;
                // The controller stops and gives the Lease up at once; serving goes on.
                signal.cancel();
            },
        )
        .await;
        // Stops the controller and gives the Lease up so another replica takes over at once.
        if tokio::time::timeout(Duration::from_secs(15), election)
            .await
            .is_err()
        {
            tracing::warn!("leader election did not stop within 15 s");
        }
        return Ok(());
    };
    let view = StaticView(Arc::new(load_static(dir, args.source.allow_incomplete)?));
    let reviewer = Arc::new(Reviewer::new(view, args.source.policy, metrics, confirm));
    serve_and_drain(
        reviewer,
        (listener, tls),
        (ops_listener, plain_tls),
        &limits,
        shutdown_delay,
        shutdown_signal(),
    )
    .await;
    Ok(())
}

/// Serves the webhook, and probes and metrics on the ops listener if there is one, until
/// `signal`; then drains (`/readyz` 503 on both at once, connections still accepted for `delay`,
/// in-flight requests finished). The ops listener answers until the webhook server has stopped.
async fn serve_and_drain<V: crate::view::ClusterView>(
    reviewer: Arc<Reviewer<V>>,
    (listener, tls): (tokio::net::TcpListener, Arc<rustls::ServerConfig>),
    (ops_listener, ops_tls): (Option<tokio::net::TcpListener>, Arc<rustls::ServerConfig>),
    limits: &Limits,
    delay: Duration,
    signal: impl std::future::Future<Output = ()>,
) {
    let draining = server::Draining::default();
    let ops_stop = CancellationToken::new();
    let ops = serve_ops(
        ops_listener,
        ops_tls,
        Arc::clone(&reviewer),
        limits,
        &ops_stop,
        draining.clone(),
    );
    let app = server::router_with_drain(reviewer, limits.request_timeout, draining.clone());
    let drained = server::drain_after(signal, draining, delay);
    let main = async {
        server::serve(listener, tls, app, limits, drained).await;
        ops_stop.cancel();
    };
    tokio::join!(main, ops);
}

/// The `--metrics-listen` server (probes and metrics), if configured, until `shutdown`.
async fn serve_ops<V: crate::view::ClusterView>(
    listener: Option<tokio::net::TcpListener>,
    tls: Arc<rustls::ServerConfig>,
    reviewer: Arc<Reviewer<V>>,
    limits: &Limits,
    shutdown: &CancellationToken,
    draining: server::Draining,
) {
    if let Some(listener) = listener {
        let app = server::ops_router(reviewer, draining);
        server::serve(listener, tls, app, limits, shutdown.cancelled()).await;
    }
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

/// The dump `serve --from-dir` decides from: one snapshot, so disagreeing copies (like an
/// incomplete dump) need --allow-incomplete, and then the copy read last of each is served.
fn load_static(dir: &Path, allow_incomplete: bool) -> Result<Snapshot, String> {
    let loaded = read_dump(dir, allow_incomplete)?;
    for w in loaded.warnings.iter().chain(&loaded.incomplete) {
        tracing::warn!("{w}");
    }
    if let Some(note) = loaded.variant_note() {
        if !allow_incomplete {
            return Err(format!(
                "{}: {note}, but serve --from-dir decides from one snapshot; pass --allow-incomplete \
                 to serve the copy read last of each",
                dir.display()
            ));
        }
        tracing::warn!("{note}; serving the copy read last of each");
    }
    Ok(loaded.snapshot)
}

/// Runs `release-finalizers`; returns the exit status (0 none left, 1 some kept, 2 error:
/// nothing could be read, or some object could not be released).
pub async fn release_finalizers(args: ReleaseArgs) -> ExitCode {
    let result = async {
        let client = args.cluster.client().await?;
        uninstall::release_all(&client, args.force).await
    }
    .await;
    match result {
        Ok(summary) => {
            print!("{}", summary.render());
            if !summary.failed.is_empty() {
                let names: Vec<&str> = summary.failed.iter().map(|(n, _)| n.as_str()).collect();
                eprintln!(
                    "error: could not release {} MachineOSConfig(s): {} (see above why)",
                    names.len(),
                    names.join(", ")
                );
                ExitCode::from(2)
            } else if summary.complete() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn client_ca_needs_a_metrics_listener_for_probes() {
        use clap::Parser as _;
        let base = [
            "mosc-guard",
            "serve",
            "--tls-cert-file",
            "c",
            "--tls-key-file",
            "k",
        ];
        let with = |extra: &[&str]| Cli::try_parse_from(base.iter().chain(extra));
        assert!(with(&["--client-ca-file", "ca.crt"]).is_err());
        let parsed = with(&[
            "--client-ca-file",
            "ca.crt",
            "--metrics-listen",
            "0.0.0.0:9443",
        ])
        .expect("both flags");
        let Command::Serve(args) = parsed.command else {
            panic!("serve expected");
        };
        assert_eq!(
            args.metrics_listen,
            Some("0.0.0.0:9443".parse().expect("addr"))
        );
        assert!(with(&["--metrics-listen", "0.0.0.0:9443"]).is_ok());
    }

    #[test]
    fn targets() {
        let ok = [
            ("worker", TargetKind::MachineOSConfig, "worker"),
            ("mosc/worker", TargetKind::MachineOSConfig, "worker"),
            (
                "machineosconfig/worker",
                TargetKind::MachineOSConfig,
                "worker",
            ),
            (
                "MachineOSBuild/worker-1",
                TargetKind::MachineOSBuild,
                "worker-1",
            ),
            ("mosb/worker-1", TargetKind::MachineOSBuild, "worker-1"),
        ];
        for (t, kind, name) in ok {
            assert_eq!(parse_target(t), Ok((kind, name)), "{t}");
        }
        for bad in ["pod/x", "mosc/", "", "mosc/a/b"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
