//! A real node for the node tier (`tests/node/`): Debian's containerd and runc, a CNI bridge, a
//! kubelet and kube-proxy built from the same Kubernetes module as the API server, joined to a
//! control plane started with [`ControlPlane::start_for_node`] (which adds the scheduler and
//! the workload controllers), so the shipped Deployment runs as pods. The images it runs are
//! imported from archives: a locally built pause image and the images a test names from
//! podman's storage (`make image`).
//!
//! One node per machine at a time (fixed paths, [`layout`]): starting one waits for the
//! machine's node lock, and cleans up what a killed earlier run left ([`teardown`]). Dropping it
//! deletes its pods through the API, stops kube-proxy, the kubelet and containerd, and removes
//! the rest; drop it before its control plane (`scenario::NodeCluster` does).

pub mod layout;

mod kubelet;
mod network;
mod pods;
mod runtime;
mod teardown;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::Result;
use crate::binaries::node_binaries;
use crate::controlplane::ControlPlane;
use crate::process::ChildProcess;
use layout::{Layout, NodeLock};

pub use network::node_ip;
pub use pods::PodMemory;

/// The node's name (its Node object, `kubernetes.io/hostname`): not one of the simulated
/// workers', and in no pool.
pub const NODE_NAME: &str = "mosc-guard-node";

/// A running node. Fields are stopped in [`Drop`] in the order the notes on this machine give.
pub struct Node {
    name: String,
    ip: Ipv4Addr,
    layout: Layout,
    admin_kubeconfig: PathBuf,
    kube_proxy: Option<ChildProcess>,
    kubelet: Option<ChildProcess>,
    containerd: Option<ChildProcess>,
    scratch: TempDir,
    startup: Duration,
    _lock: NodeLock,
}

impl Node {
    /// Takes the machine's node lock, cleans up an earlier run's leftovers, starts containerd
    /// (with the pause image), the kubelet (until its Node is Ready) and kube-proxy (until it
    /// routes the `kubernetes` Service), joined to `cp` (started with
    /// [`ControlPlane::start_for_node`]`(`[`node_ip`]`()?)`), and imports `images` from
    /// podman's storage.
    pub async fn start(cp: &ControlPlane, images: &[&str]) -> Result<Self> {
        let started = Instant::now();
        let lock = tokio::task::spawn_blocking(NodeLock::acquire).await??;
        let layout = Layout::fixed();
        let notes = tokio::task::spawn_blocking({
            let layout = layout.clone();
            move || teardown::clean(&layout, false)
        })
        .await?;
        for note in notes {
            tracing::warn!("node: cleaning up an earlier run: {note}");
        }
        layout.create()?;
        let bins = tokio::task::spawn_blocking(node_binaries).await??;
        let (pause, pause_archive) = tokio::task::spawn_blocking(runtime::pause_image).await??;
        let ip = node_ip()?;
        let scratch = crate::temp_dir("mosc-guard-node-")?;

        network::write_cni_config(&layout)?;
        let mut node = Self {
            name: NODE_NAME.to_owned(),
            ip,
            admin_kubeconfig: cp.kubeconfig().to_owned(),
            kube_proxy: None,
            kubelet: None,
            containerd: None,
            scratch,
            startup: Duration::ZERO,
            layout,
            _lock: lock,
        };
        node.containerd = Some(runtime::start_containerd(&node.layout, &pause).await?);
        runtime::import(&node.layout, &pause_archive).await?;
        for image in images {
            runtime::load_from_podman(&node.layout, image, node.scratch.path()).await?;
        }
        node.kubelet = Some(kubelet::start(&bins.kubelet, &node.layout, cp, &node.name, ip).await?);
        node.kube_proxy = Some(
            network::start_kube_proxy(&bins.kube_proxy, &node.layout, &node.name, cp.kubeconfig())
                .await?,
        );
        node.startup = started.elapsed();
        tracing::info!(
            "node {} ({ip}) Ready, kube-proxy routing, in {:.2?}",
            node.name,
            node.startup
        );
        Ok(node)
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's address (its InternalIP; the API server advertises it too).
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// How long [`Node::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The node's paths (logs, pod volumes).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The last `lines` lines of the kubelet's, containerd's and kube-proxy's logs, for a
    /// failure message.
    pub fn log_tails(&self, lines: usize) -> String {
        ["kubelet", "containerd", "kube-proxy"]
            .iter()
            .map(|p| {
                format!(
                    "--- {p} ({})\n{}",
                    self.layout.log(p).display(),
                    crate::process::tail_of_file(&self.layout.log(p), lines)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The memory cgroup of the pod with uid `pod_uid`: usage, peak, limit ([`pods`]).
    pub fn pod_memory(&self, pod_uid: &str) -> Result<PodMemory> {
        pods::memory(pod_uid)
    }

    /// The processes in the pod with uid `pod_uid` (its sandbox's and its containers'), as the
    /// host sees them ([`pods`]).
    pub fn pod_processes(&self, pod_uid: &str) -> Result<Vec<u32>> {
        pods::processes(pod_uid)
    }

    /// Cordons the node and deletes its pods through the API (1 s grace), waiting until the
    /// kubelet has stopped them and torn down their sandboxes; best effort.
    fn delete_pods(&self) {
        let kubectl = |args: &[&str]| {
            Command::new("/usr/bin/kubectl")
                .arg("--kubeconfig")
                .arg(&self.admin_kubeconfig)
                .args(args)
                .stdin(Stdio::null())
                .output()
        };
        let selector = format!("spec.nodeName={}", self.name);
        let steps: [&[&str]; 2] = [
            &["cordon", &self.name, "--request-timeout=10s"],
            &[
                "delete",
                "pods",
                "--all-namespaces",
                "--field-selector",
                &selector,
                "--grace-period=1",
                "--timeout=60s",
                "--request-timeout=10s",
            ],
        ];
        for args in steps {
            match kubectl(args) {
                Ok(out) if out.status.success() => {}
                Ok(out) => tracing::warn!(
                    "node teardown: kubectl {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Err(e) => tracing::warn!("node teardown: kubectl: {e}"),
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let started = Instant::now();
        self.delete_pods();
        // Stopped in this order, each waited for (ChildProcess::stop).
        drop(self.kube_proxy.take());
        drop(self.kubelet.take());
        drop(self.containerd.take());
        for note in teardown::clean(&self.layout, true) {
            tracing::warn!("node teardown: {note}");
        }
        tracing::info!("node {} torn down in {:.2?}", self.name, started.elapsed());
    }
}
