//! Where the node lives, and who may run it. Some of its paths are fixed by the programs
//! (containerd's shims, the kubelet's device-plugin socket, the `/kubepods` cgroups, iptables),
//! so one node runs per machine at a time: [`NodeLock`] serializes every process that starts
//! one, and everything else lives under two fixed roots ([`STATE_DIR`], [`RUN_DIR`]) that a
//! later run can find and clean up when an earlier one was killed ([`super::teardown`]).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::Result;

/// Persistent state: containerd's content and snapshots, the kubelet's root (pod volumes),
/// the CNI configuration and IP allocations, certificates, configuration files and logs.
pub const STATE_DIR: &str = "/var/lib/mosc-guard-node";
/// Runtime state: containerd's socket and task state, runc's state, network namespaces.
pub const RUN_DIR: &str = "/run/mosc-guard-node";
/// The lock file held while a node runs.
const LOCK_FILE: &str = "/run/mosc-guard-node.lock";

/// Debian's CNI plugins (package containernetworking-plugins).
pub const CNI_BIN: &str = "/usr/lib/cni";

/// The Linux bridge the pods' veths join (CNI `bridge` plugin). Not podman's `cni-podman0`.
pub const BRIDGE: &str = "mosc-guard0";
/// The pods' subnet (CNI `host-local`); the bridge holds its first address. Not podman's
/// 10.88.0.0/16.
pub const POD_CIDR: &str = "10.244.0.0/24";

/// An exclusive `flock` on [`LOCK_FILE`], released when dropped (or when the process dies).
pub struct NodeLock {
    _file: File,
}

impl NodeLock {
    /// Waits for the lock (another test process may be running a node); blocks, so call it from
    /// `spawn_blocking`.
    pub fn acquire() -> Result<Self> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK_FILE)
            .map_err(|e| format!("opening the node lock {LOCK_FILE}: {e}"))?;
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!("locking {LOCK_FILE}: {}", std::io::Error::last_os_error()).into());
        }
        Ok(Self { _file: file })
    }
}

/// The node's paths, all under [`STATE_DIR`] and [`RUN_DIR`].
#[derive(Debug, Clone)]
pub struct Layout {
    pub state: PathBuf,
    pub run: PathBuf,
}

impl Layout {
    pub fn fixed() -> Self {
        Self {
            state: PathBuf::from(STATE_DIR),
            run: PathBuf::from(RUN_DIR),
        }
    }

    /// Creates the directories (after [`super::teardown`] removed an earlier run's).
    pub fn create(&self) -> Result<()> {
        for dir in [
            self.state.clone(),
            self.run.clone(),
            self.cni_conf_dir(),
            self.pki_dir(),
            self.logs(),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    pub fn containerd_config(&self) -> PathBuf {
        self.state.join("containerd.toml")
    }
    pub fn containerd_root(&self) -> PathBuf {
        self.state.join("containerd")
    }
    pub fn containerd_state(&self) -> PathBuf {
        self.run.join("containerd")
    }
    pub fn containerd_socket(&self) -> PathBuf {
        self.run.join("containerd.sock")
    }
    /// runc's state (the shim's `Root` option): not `/run/containerd/runc`.
    pub fn runc_root(&self) -> PathBuf {
        self.run.join("runc")
    }
    /// containerd's `opt` plugin directory: not `/opt/containerd`.
    pub fn containerd_opt(&self) -> PathBuf {
        self.state.join("opt")
    }
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.state.join("cni")
    }
    /// host-local's IP allocations: not `/var/lib/cni`.
    pub fn cni_ipam_dir(&self) -> PathBuf {
        self.state.join("cni-ipam")
    }
    pub fn kubelet_root(&self) -> PathBuf {
        self.state.join("kubelet")
    }
    pub fn kubelet_config(&self) -> PathBuf {
        self.state.join("kubelet.yaml")
    }
    pub fn pki_dir(&self) -> PathBuf {
        self.state.join("pki")
    }
    /// Logs of containerd, the kubelet and kube-proxy (kept until the next run starts, so a
    /// failed run can be read afterwards).
    pub fn logs(&self) -> PathBuf {
        self.state.join("logs")
    }
    pub fn log(&self, program: &str) -> PathBuf {
        self.logs().join(format!("{program}.log"))
    }

    /// Whether `path` is under one of the node's roots.
    pub fn owns(&self, path: &Path) -> bool {
        path.starts_with(&self.state) || path.starts_with(&self.run)
    }
}
