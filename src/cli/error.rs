//! Why a subcommand could not run: printed as `error: ...` with exit status 2.

use std::path::PathBuf;

use crate::access::dump::DumpError;
use crate::access::live::LiveError;
use crate::access::registry::PullConfigError;
use crate::core::policy::TargetKind;
use crate::defer::uninstall::UninstallError;
use crate::server::tls::TlsError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An argument clap cannot check (a `check` target's spelling).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Dump(#[from] DumpError),
    /// What nodes pull with (the ControllerConfig, mirror sets, `--authfile`) cannot be used.
    #[error(transparent)]
    Pull(#[from] PullConfigError),
    /// A dump that could not be read whole, and `--allow-incomplete` was not given.
    #[error(
        "{} is incomplete, so {trust}; what could not be read:{}\n\
         Collect it again (oc adm must-gather, or oc get ... -o yaml), or pass --allow-incomplete \
         to decide on what could be read.",
        dir.display(),
        missing.iter().map(|m| format!("\n  {m}")).collect::<String>()
    )]
    Incomplete {
        dir: PathBuf,
        missing: Vec<String>,
        /// What cannot be trusted ("no verdict can say a deletion is safe").
        trust: &'static str,
    },
    /// `recover POOL` names a pool the source does not hold.
    #[error("machineconfigpool \"{name}\" not found in {place} (pools: {})", pools.join(", "))]
    PoolNotFound {
        name: String,
        place: String,
        pools: Vec<String>,
    },
    /// `serve --from-dir` serves one snapshot; copies that disagree need a choice.
    #[error(
        "{}: {note}, but serve --from-dir decides from one snapshot; pass --allow-incomplete to serve \
         the copy read last of each",
        dir.display()
    )]
    Disagreeing { dir: PathBuf, note: String },
    #[error("{} \"{name}\" not found in {place}{hint}", kind.cli_name())]
    NotFound {
        kind: TargetKind,
        name: String,
        place: String,
        hint: String,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("listening on {addr}{what}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Uninstall(#[from] UninstallError),
    #[error("encoding the report: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A combination of `serve` flags that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "--deletion-mode defer needs --policy in-flight: under in-use the finalizer would never \
         leave a settled pool's MachineOSConfig (its nodes run the image until it is deleted)"
    )]
    DeferNeedsInFlight,
    #[error(
        "--deletion-mode defer needs a live cluster (the finalizer controller writes to it), not --from-dir"
    )]
    DeferNeedsLiveCluster,
    #[error(
        "--enforcement warn is for deny mode: defer mode admits deletions already and holds them \
         until the rollout settles"
    )]
    WarnNeedsDenyMode,
}
