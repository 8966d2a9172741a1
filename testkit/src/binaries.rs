//! Paths of the kube-apiserver, kube-controller-manager, etcd and registry binaries the harness
//! runs, and of the node tier's kubelet, kube-proxy and kube-scheduler.

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

/// The node tier's binaries ([`crate::node`]), built from the same Kubernetes module.
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    pub kube_proxy: PathBuf,
    pub kube_scheduler: PathBuf,
}

/// The node tier's binaries, built (once per process, only if not cached) by
/// `hack/build-binaries.sh`. Blocks while building; call it from `spawn_blocking`.
pub fn node_binaries() -> Result<&'static NodeBinaries> {
    static BINARIES: OnceLock<std::result::Result<NodeBinaries, String>> = OnceLock::new();
    BINARIES
        .get_or_init(|| {
            let built = build_script_output("node").map_err(|e| e.to_string())?;
            Ok(NodeBinaries {
                kubelet: built.path("kubelet").map_err(|e| e.to_string())?,
                kube_proxy: built.path("kube-proxy").map_err(|e| e.to_string())?,
                kube_scheduler: built.path("kube-scheduler").map_err(|e| e.to_string())?,
            })
        })
        .as_ref()
        .map_err(|e| e.clone().into())
}

/// What `hack/build-binaries.sh` printed: one `name=path` line per binary.
struct BuildOutput {
    script: String,
    stdout: String,
}

impl BuildOutput {
    fn path(&self, name: &str) -> Result<PathBuf> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('=').map(PathBuf::from))
            .ok_or_else(|| {
                format!(
                    "{} printed no path for {name}: {:?}",
                    self.script, self.stdout
                )
                .into()
            })
    }
}

/// Runs the build script (progress on the inherited stderr) and parses its `name=path` lines.
fn run_build_script() -> Result<Binaries> {
    let built = build_script_output("control-plane")?;
    Ok(Binaries {
        kube_apiserver: built.path("kube-apiserver")?,
        kube_controller_manager: built.path("kube-controller-manager")?,
        etcd: built.path("etcd")?,
        registry: built.path("registry")?,
    })
}

/// Runs the build script for the binaries of `set` (its usage names them), its progress on the
/// inherited stderr.
fn build_script_output(set: &str) -> Result<BuildOutput> {
    let path = crate::repo_root().join("hack/build-binaries.sh");
    let script = path.display();
    let out = Command::new("bash")
        .arg(&path)
        .arg(set)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{script} failed ({}); see its messages above", out.status).into());
    }
    Ok(BuildOutput {
        script: script.to_string(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}
