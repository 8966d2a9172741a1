//! Paths of the kube-apiserver, kube-controller-manager, etcd and registry binaries the harness runs.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::Result;

/// The server binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    /// Run with only its garbage collector (the harness has no other controllers).
    pub kube_controller_manager: PathBuf,
    pub etcd: PathBuf,
    pub registry: PathBuf,
}

/// The binaries, built (once per process, only if not cached) by `hack/build-binaries.sh`.
/// `MOSC_GUARD_KUBE_APISERVER`, `MOSC_GUARD_KUBE_CONTROLLER_MANAGER`, `MOSC_GUARD_ETCD` and
/// `MOSC_GUARD_REGISTRY` override a path each; with all four set the script is not run. Blocks while building; call it from
/// `tokio::task::spawn_blocking` in async code.
pub fn binaries() -> Result<&'static Binaries> {
    static BINARIES: OnceLock<std::result::Result<Binaries, String>> = OnceLock::new();
    BINARIES
        .get_or_init(|| locate().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| e.clone().into())
}

fn locate() -> Result<Binaries> {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let overrides = (
        env("MOSC_GUARD_KUBE_APISERVER"),
        env("MOSC_GUARD_KUBE_CONTROLLER_MANAGER"),
        env("MOSC_GUARD_ETCD"),
        env("MOSC_GUARD_REGISTRY"),
    );
    let bins = match overrides {
        (Some(kube_apiserver), Some(kube_controller_manager), Some(etcd), Some(registry)) => {
            Binaries {
                kube_apiserver,
                kube_controller_manager,
                etcd,
                registry,
            }
        }
        (kube_apiserver, kube_controller_manager, etcd, registry) => {
            let built = run_build_script()?;
            Binaries {
                kube_apiserver: kube_apiserver.unwrap_or(built.kube_apiserver),
                kube_controller_manager: kube_controller_manager
                    .unwrap_or(built.kube_controller_manager),
                etcd: etcd.unwrap_or(built.etcd),
                registry: registry.unwrap_or(built.registry),
            }
        }
    };
    for path in [
        &bins.kube_apiserver,
        &bins.kube_controller_manager,
        &bins.etcd,
        &bins.registry,
    ] {
        if !path.is_file() {
            return Err(format!("test binary {} does not exist", path.display()).into());
        }
    }
    Ok(bins)
}

/// Runs the build script (progress on the inherited stderr) and parses its `name=path` lines.
fn run_build_script() -> Result<Binaries> {
    let path = crate::repo_root().join("hack/build-binaries.sh");
    let script = path.display();
    let out = Command::new("bash")
        .arg(&path)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{script} failed ({}); see its messages above", out.status).into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let find = |name: &str| -> Result<PathBuf> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('=').map(PathBuf::from))
            .ok_or_else(|| format!("{script} printed no path for {name}: {stdout:?}").into())
    };
    Ok(Binaries {
        kube_apiserver: find("kube-apiserver")?,
        kube_controller_manager: find("kube-controller-manager")?,
        etcd: find("etcd")?,
        registry: find("registry")?,
    })
}
