//! Command line: `serve` (the webhook) and `check` (the same verdict, offline or live).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::metrics::Metrics;
use crate::policy::{self, Deletion, PolicyMode, TargetKind};
use crate::report::{self, Report};
use crate::review::Reviewer;
use crate::server::{self, Limits};
use crate::snapshot::Snapshot;
use crate::tls::{CertFiles, ReloadingResolver};
use crate::view::{ClusterView, StaticView};
use crate::{cache, dump, live};

#[derive(Debug, Parser)]
#[command(
    name = "mosc-guard",
    version,
    about = "Keeps Image Mode pools from degrading when a MachineOSConfig or MachineOSBuild is deleted too early"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the admission webhook (HTTPS: /validate, /healthz, /readyz, /metrics).
    Serve(ServeArgs),
    /// Say whether deleting a MachineOSConfig or MachineOSBuild is safe now.
    /// Exit status: 0 safe, 1 would be blocked, 2 error.
    Check(CheckArgs),
}

/// Where the cluster's objects come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// Read objects from YAML/JSON files below DIR (a must-gather, `oc get -o yaml`
    /// output) instead of a live cluster.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kubeconfig", "context"])]
    pub from_dir: Option<PathBuf>,
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
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub tls_reload_interval: u64,
    /// Deadline for one request, in seconds; keep it below the webhook's timeoutSeconds.
    #[arg(long, default_value_t = 8, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// Deadline for the fresh read that confirms an allow, in seconds.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub confirm_timeout: u64,
    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(long, default_value_t = 20, value_name = "SECONDS")]
    pub shutdown_grace: u64,
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

impl SourceArgs {
    /// A client for the kubeconfig and context given (or inferred).
    async fn client(&self) -> Result<kube::Client, String> {
        live::client(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(|e| e.to_string())
    }
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
    let (snapshot, notes, source) = match &args.source.from_dir {
        Some(dir) => {
            let loaded = dump::load_dir(dir).map_err(|e| e.to_string())?;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            (loaded.snapshot, loaded.warnings, dir.display().to_string())
        }
        None => {
            let client = args.source.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await.map_err(|e| e.to_string())?;
            let notes: Vec<String> = missing
                .iter()
                .map(|m| format!("the cluster does not serve {m}; treated as empty"))
                .collect();
            for n in &notes {
                eprintln!("warning: {n}");
            }
            (snapshot, notes, "the cluster".to_string())
        }
    };
    let target = find(&snapshot, kind, name).ok_or_else(|| {
        let api = format!("{}s.", kind.cli_name());
        let hint = notes
            .iter()
            .find(|n| n.contains(&api))
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        format!("{} \"{name}\" not found in {source}{hint}", kind.cli_name())
    })?;
    let verdict = policy::evaluate(&snapshot, target, args.source.policy);
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
    let resolver = ReloadingResolver::load(CertFiles {
        cert: args.tls_cert_file.clone(),
        key: args.tls_key_file.clone(),
    })
    .map_err(|e| e.to_string())?;
    let tls = Arc::new(resolver.server_config().map_err(|e| e.to_string())?);
    let _reloader = resolver.spawn_reloader(Duration::from_secs(args.tls_reload_interval.max(1)));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", args.listen))?;
    tracing::info!(listen = %args.listen, policy = %args.source.policy, "mosc-guard serving");
    match &args.source.from_dir {
        Some(dir) => {
            let view = StaticView(Arc::new(load_static(dir)?));
            run_server(view, &args, listener, tls).await
        }
        None => {
            let client = args.source.client().await?;
            run_server(cache::Caches::start(client), &args, listener, tls).await
        }
    }
    Ok(())
}

fn load_static(dir: &Path) -> Result<Snapshot, String> {
    let loaded = dump::load_dir(dir).map_err(|e| e.to_string())?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    Ok(loaded.snapshot)
}

async fn run_server<V: ClusterView>(
    view: V,
    args: &ServeArgs,
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
) {
    let reviewer = Reviewer::new(
        view,
        args.source.policy,
        Arc::new(Metrics::default()),
        Duration::from_secs(args.confirm_timeout.max(1)),
    );
    let limits = Limits {
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        header_read_timeout: Duration::from_secs(10),
    };
    let app = server::router(reviewer, limits.request_timeout);
    server::serve(listener, tls, app, &limits, shutdown_signal()).await;
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
