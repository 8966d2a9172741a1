//! Paths of the kube-apiserver, etcd and registry binaries the harness runs.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::Result;

/// The three server binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    pub registry: PathBuf,
}

/// The binaries, built (once per process, only if not cached) by `hack/build-binaries.sh`.
/// `MOSC_GUARD_KUBE_APISERVER`, `MOSC_GUARD_ETCD` and `MOSC_GUARD_REGISTRY` override a path each;
/// with all three set the script is not run. Blocks while building; call it from
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
        env("MOSC_GUARD_ETCD"),
        env("MOSC_GUARD_REGISTRY"),
    );
    let bins = match overrides {
        (Some(kube_apiserver), Some(etcd), Some(registry)) => Binaries {
            kube_apiserver,
            etcd,
            registry,
        },
        (kube_apiserver, etcd, registry) => {
            let built = run_build_script()?;
            Binaries {
                kube_apiserver: kube_apiserver.unwrap_or(built.kube_apiserver),
                etcd: etcd.unwrap_or(built.etcd),
                registry: registry.unwrap_or(built.registry),
            }
        }
    };
    for path in [&bins.kube_apiserver, &bins.etcd, &bins.registry] {
        if !path.is_file() {
            return Err(format!("test binary {} does not exist", path.display()).into());
        }
    }
    Ok(bins)
}

/// Runs the build script (progress on the inherited stderr) and parses its `name=path` lines.
fn run_build_script() -> Result<Binaries> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/hack/build-binaries.sh");
    let out = Command::new("bash")
        .arg(script)
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
        etcd: find("etcd")?,
        registry: find("registry")?,
    })
}
