//! mosc-guard's test kit: everything its integration tests, examples and benchmarks share.
//!
//! Real etcd + kube-apiserver ([`controlplane`], with a ClusterVersion: [`clusterversion`]), a
//! real distribution registry ([`registry`]), an MCO simulator playing OpenShift 4.19 to 4.23,
//! either side of each z-stream fix (4.20 by default: [`release`]) that drives MachineOSConfigs, builds, nodes and pools through them, its
//! machine-os-builder as MCO's own service account ([`mob`]) ([`simulator`]), the report's
//! scenario and its steps ([`scenario`]), and the product itself:
//! the `mosc-guard` process ([`guard`]), registered as the cluster's webhook ([`webhooks`]),
//! probed ([`probe`]), sent AdmissionReviews ([`review`]) and run as a CLI ([`cli`]); a webhook
//! that makes something happen at one exact moment of a request's admission ([`interpose`]); and a
//! scripted [`ClusterView`](mosc_guard::access::view::ClusterView) for in-process servers
//! ([`view`]). Every server listens on 127.0.0.1 only and stops when its handle is dropped.
//!
//! The kit cannot see cargo's `CARGO_BIN_EXE_mosc-guard` (only the package's own tests can):
//! a test names the binary with [`guard::GuardBin::at`]`(env!("CARGO_BIN_EXE_mosc-guard"))`;
//! examples and benchmarks use [`guard::GuardBin::from_env`] (`MOSC_GUARD_BIN`).
//!
//! Environment: `MOSC_GUARD_KUBE_APISERVER` / `MOSC_GUARD_KUBE_CONTROLLER_MANAGER` /
//! `MOSC_GUARD_ETCD` / `MOSC_GUARD_REGISTRY` override the binaries built by
//! `hack/build-binaries.sh`; `MOSC_GUARD_E2E_KEEP_DIRS=1` keeps the temporary directories (logs,
//! PKI, kubeconfig) of a run; `RUST_LOG` filters the kit's own log (default `info`; a guard
//! process inherits it too, a CLI run does not, see [`cli`]).

pub mod binaries;
pub mod cli;
pub mod clusterversion;
pub mod connect_proxy;
pub mod controlplane;
pub mod crds;
pub mod forwarder;
pub mod guard;
pub mod https_stub;
pub mod image_ref;
pub mod interpose;
pub mod kubectl;
pub mod kubelet;
pub mod machine_api;
pub mod manifests;
pub mod markdown;
pub mod mco;
pub mod net;
pub mod node;
pub mod node_pull;
pub mod node_registry;
pub mod pki;
pub mod poll;
pub mod probe;
pub mod process;
pub mod realistic;
pub mod registry;
pub mod registry_client;
pub mod release;
pub mod review;
pub mod scenario;
pub mod simulator;
pub mod tls;
pub mod users;
pub mod view;
pub mod webhooks;

use std::path::{Path, PathBuf};

/// Error of the kit: any error or message. Its `Debug` is its `Display` (with the chain of
/// sources), so `expect` in a test prints multi-line messages such as log tails readably.
pub struct Error(Box<dyn std::error::Error + Send + Sync>);

impl<E: Into<Box<dyn std::error::Error + Send + Sync>>> From<E> for Error {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Result type of the kit.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Field manager the harness uses for server-side apply.
pub const FIELD_MANAGER: &str = "mosc-guard-e2e";

/// The mosc-guard repository (this crate's parent directory): where `tests/crds`,
/// `tests/fixtures`, `manifests` and `hack` are.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// The number in environment variable `name` (a long run's size, say), `default` when it is
/// unset; panics when it is set but not a number.
pub fn env_number<T>(name: &str, default: T) -> T
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
}

/// A temporary directory named `<prefix>...`, removed on Drop unless `MOSC_GUARD_E2E_KEEP_DIRS`
/// is set (then its path is logged, so logs of a failed run can be read afterwards).
pub fn temp_dir(prefix: &str) -> Result<tempfile::TempDir> {
    let keep = std::env::var_os("MOSC_GUARD_E2E_KEEP_DIRS").is_some_and(|v| !v.is_empty());
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .disable_cleanup(keep)
        .tempdir()?;
    if keep {
        tracing::info!("keeping {}", dir.path().display());
    }
    Ok(dir)
}

/// Installs a tracing subscriber (once per process) that writes through the test harness's
/// capture, so `--nocapture` shows the story of a test. `RUST_LOG` overrides the default `info`.
pub fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .with_ansi(false)
            .with_target(false)
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .try_init();
    });
}

/// The runtime the kit's programs (the demo, the cluster benchmark) run on: two workers, as the
/// tests' `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
