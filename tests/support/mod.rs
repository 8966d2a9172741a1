//! End-to-end test harness for mosc-guard.
//!
//! Real etcd + kube-apiserver ([`controlplane`]), a real distribution registry ([`registry`]), an
//! MCO 4.20 simulator that drives MachineOSConfigs, builds, nodes and pools through them
//! ([`simulator`]), scenario helpers ([`scenario`]) and the product process itself ([`guard`]).
//! Every server listens on 127.0.0.1 only and stops when its handle is dropped.
//!
//! Each test file includes this with `mod support;`; not every file uses every helper.
//!
//! Environment: `MOSC_GUARD_KUBE_APISERVER` / `MOSC_GUARD_KUBE_CONTROLLER_MANAGER` / `MOSC_GUARD_ETCD` / `MOSC_GUARD_REGISTRY` override
//! the binaries built by `hack/build-binaries.sh`; `MOSC_GUARD_E2E_KEEP_DIRS=1` keeps the temporary
//! directories (logs, PKI, kubeconfig) of a run; `RUST_LOG` filters the harness's own log
//! (default `info`; the guard process inherits it too).
#![allow(dead_code, unused_imports)]

pub mod binaries;
pub mod controlplane;
pub mod crds;
pub mod forwarder;
pub mod guard;
pub mod image_ref;
pub mod kubectl;
pub mod manifests;
pub mod mco;
pub mod net;
pub mod objects;
pub mod pki;
pub mod process;
pub mod realistic;
pub mod registry;
pub mod registry_client;
pub mod scenario;
pub mod serve;
pub mod simulator;
pub mod steps;
pub mod tls;
pub mod users;

/// Error of the harness: any error or message. Its `Debug` is its `Display` (with the chain of
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

/// Result type of the harness.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
