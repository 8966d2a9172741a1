//! A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver with the harness's MCO CRDs
//! installed, and kube-controller-manager running only its garbage collector (which finishes
//! `foregroundDeletion`, the MOSBs' finalizer, and deletes MOSBs whose MOSC is gone). No
//! scheduler and no other controllers: nodes are plain objects and MCO is simulated. The node
//! tier's control plane ([`ControlPlane::start_for_node`]) adds what a real node's pods need
//! ([`workloads`]). [`ControlPlane::start`] lends one an earlier test of the process finished
//! with, reset ([`pool`]).

mod pool;
mod servers;
mod workloads;

use std::ffi::{OsStr, OsString};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use crate::kubectl::KubectlOutput;

use crate::binaries::binaries;
use crate::net::{free_port, retry_start};
use crate::pki::Pki;
use crate::probe;
use crate::process::ChildProcess;
use crate::tls::{ensure_crypto_provider, https_client};
use crate::{Result, init_tracing, temp_dir};
use crate::{clusterversion, crds, kubectl};
use servers::{
    Respawn, apiserver_spec, etcd_spec, start_controller_manager, wait_apiserver_ready,
    wait_etcd_ready,
};

/// Field manager the harness uses for server-side apply (defined with the CRDs it first applies).
pub use crate::crds::FIELD_MANAGER;

/// A running etcd + kube-apiserver + garbage collector (+ kube-scheduler for a real node).
/// Dropping it stops them all and removes their data, or, for one [`ControlPlane::start`]
/// started, gives it back to this process's [`pool`] for the next test.
pub struct ControlPlane {
    servers: Option<Servers>,
    client: kube::Client,
    // Cleared by whatever a reset cannot undo (a restarted server, a removed CRD).
    reusable: AtomicBool,
}

/// What a control plane is beyond its client: its processes, ports, PKI and directory.
struct Servers {
    // Fields drop in order: the scheduler, the controller-manager, then the API server, then
    // etcd, the directory last.
    _scheduler: Option<ChildProcess>,
    _controller_manager: ChildProcess,
    // Behind locks so a chaos test can kill and restart them while others use the control
    // plane through `&self` (clients reconnect to the same port).
    apiserver: Mutex<ChildProcess>,
    etcd: Mutex<ChildProcess>,
    apiserver_spec: Respawn,
    etcd_spec: Respawn,
    etcd_url: String,
    pki: Pki,
    kubeconfig: PathBuf,
    server: String,
    startup: Duration,
    // The objects a fresh control plane holds: what a reset keeps ([`pool`]).
    baseline: pool::Baseline,
    dir: TempDir,
}

/// The OpenShift release a control plane says it runs (its ClusterVersion) unless a test sets
/// another with [`ControlPlane::set_release`]: the one the simulator's default builder models.
pub const DEFAULT_RELEASE: &str = "4.20.15";

impl ControlPlane {
    /// Makes the cluster say it runs OpenShift `version` (its ClusterVersion), as after an
    /// upgrade: the guard decides with that release's rules.
    pub async fn set_release(&self, version: &str) -> Result<()> {
        clusterversion::set_release(&self.client, version).await
    }

    /// Makes the ClusterVersion say an upgrade to `target` is in flight
    /// ([`clusterversion::start_upgrade`]).
    pub async fn start_upgrade(&self, target: &str) -> Result<()> {
        clusterversion::start_upgrade(&self.client, target).await
    }

    /// Makes the ClusterVersion say the upgrade in flight completed
    /// ([`clusterversion::finish_upgrade`]).
    pub async fn finish_upgrade(&self) -> Result<()> {
        clusterversion::finish_upgrade(&self.client).await
    }

    /// Lends an idle control plane of this process, reset, where there is one ([`pool`]); else
    /// starts etcd and kube-apiserver on free ports, writes an admin kubeconfig, waits for
    /// `/readyz`, applies the CRDs in `tests/crds/`, waits until they are Established and warms
    /// them up (see [`crds::install`]), so the first test requests are not slowed down.
    pub async fn start() -> Result<Self> {
        if let Some(leased) = pool::lease().await {
            return Ok(leased);
        }
        let mut cp = retry_start("control plane", || Self::start_once(None, &[], None)).await?;
        let baseline = pool::Baseline::capture(&cp.client).await?;
        if let Some(servers) = cp.servers.as_mut() {
            servers.baseline = baseline;
        }
        cp.reusable = true.into();
        Ok(cp)
    }

    /// Like [`ControlPlane::start`], for a real node at `node_ip` ([`crate::node::Node`]):
    /// kube-apiserver also listens on `node_ip` and admits the kubelet and the pods' tokens,
    /// kube-controller-manager also runs the workload controllers, and kube-scheduler runs
    /// ([`workloads`]). Only the node tier starts this one.
    pub async fn start_for_node(node_ip: Ipv4Addr) -> Result<Self> {
        retry_start("control plane", || {
            Self::start_once(None, &[], Some(node_ip))
        })
        .await
    }

    /// Like [`ControlPlane::start`], with kube-apiserver's `--admission-control-config-file`
    /// set to `config` (e.g. a WebhookAdmissionConfiguration giving the API server a client
    /// certificate to present to a webhook).
    pub async fn start_with_admission_config(config: &Path) -> Result<Self> {
        retry_start("control plane", || {
            Self::start_once(Some(config), &[], None)
        })
        .await
    }

    /// Like [`ControlPlane::start`], with extra etcd flags (e.g. a larger
    /// `--max-request-bytes`, as some clusters configure).
    pub async fn start_with_etcd_args(etcd_args: &[&str]) -> Result<Self> {
        retry_start("control plane", || Self::start_once(None, etcd_args, None)).await
    }

    async fn start_once(
        admission_config: Option<&Path>,
        etcd_args: &[&str],
        node_ip: Option<Ipv4Addr>,
    ) -> Result<Self> {
        init_tracing();
        ensure_crypto_provider();
        let started = Instant::now();
        let bins = tokio::task::spawn_blocking(binaries).await??;
        let dir = temp_dir("mosc-guard-cp-")?;
        let pki = Pki::new(&dir.path().join("pki"))?;

        let (etcd_spec, etcd_url) = etcd_spec(&bins.etcd, dir.path(), etcd_args)?;
        let mut etcd = etcd_spec.spawn()?;
        wait_etcd_ready(&mut etcd, &etcd_url).await?;
        let etcd_ready = started.elapsed();

        let port = free_port()?;
        let server = format!("https://127.0.0.1:{port}");
        let apiserver_spec = apiserver_spec(
            &bins.kube_apiserver,
            dir.path(),
            &pki,
            port,
            &etcd_url,
            admission_config,
            node_ip,
        )?;
        let mut apiserver = apiserver_spec.spawn()?;
        let https = https_client(&pki.ca_pem())?;
        wait_apiserver_ready(&mut apiserver, &https, &server, Duration::from_secs(90)).await?;
        let apiserver_ready = started.elapsed();

        let admin = pki.client_cert("e2e-admin", &["system:masters"])?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
                 users:\n- name: e2e-admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
                 contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e-admin\n\
                 current-context: e2e\n",
                ca = pki.ca_path().display(),
                cert = admin.cert.display(),
                key = admin.key.display(),
            ),
        )?;
        let client = client_from_kubeconfig(&kubeconfig).await?;
        let extra: Vec<OsString> = match node_ip {
            Some(_) => workloads::controller_manager_args(pki.ca_path()),
            None => Vec::new(),
        };
        let set_up = Self::set_up(
            &client,
            &bins.kube_controller_manager,
            dir.path(),
            &kubeconfig,
            &extra,
            started,
        );
        let (crds_ready, controller_manager) = match set_up.await {
            Ok(done) => done,
            // Said with what kube-apiserver last logged: the request failed on a server that
            // had answered /readyz.
            Err(e) => {
                let state = match apiserver.check_running() {
                    Ok(()) => format!(
                        "kube-apiserver still runs; last lines of {}:\n{}",
                        apiserver.log_path().display(),
                        apiserver.log_tail(40)
                    ),
                    Err(exited) => exited.to_string(),
                };
                return Err(format!("setting the control plane up: {e}; {state}").into());
            }
        };
        let scheduler = match node_ip {
            Some(_) => {
                let node_bins =
                    tokio::task::spawn_blocking(crate::binaries::node_binaries).await??;
                Some(
                    workloads::start_scheduler(&node_bins.kube_scheduler, dir.path(), &kubeconfig)
                        .await?,
                )
            }
            None => None,
        };
        let startup = started.elapsed();
        tracing::info!(
            "control plane ready at {server} in {startup:.2?} (etcd {etcd_ready:.2?}, \
             kube-apiserver /readyz {apiserver_ready:.2?}, CRDs established and warm {:.2?} \
             after it, garbage collector synced meanwhile)",
            crds_ready - apiserver_ready,
        );
        let servers = Servers {
            _scheduler: scheduler,
            _controller_manager: controller_manager,
            apiserver: Mutex::new(apiserver),
            etcd: Mutex::new(etcd),
            apiserver_spec,
            etcd_spec,
            etcd_url,
            pki,
            kubeconfig,
            server,
            startup,
            baseline: pool::Baseline::default(),
            dir,
        };
        Ok(Self {
            servers: Some(servers),
            client,
            reusable: false.into(),
        })
    }

    /// After `/readyz`: installs the CRDs, then warms them up and sets the release while the
    /// garbage collector starts (once the CRDs are Established, so its first discovery already
    /// monitors them). Returns when the CRDs were warm, and the controller-manager.
    async fn set_up(
        client: &kube::Client,
        controller_manager: &Path,
        dir: &Path,
        kubeconfig: &Path,
        extra: &[OsString],
        started: Instant,
    ) -> Result<(Duration, ChildProcess)> {
        let established = crds::install(client).await?;
        let warm = async {
            established.warm_up(client).await?;
            clusterversion::set_release(client, DEFAULT_RELEASE).await?;
            Ok::<_, crate::Error>(started.elapsed())
        };
        tokio::try_join!(
            warm,
            start_controller_manager(controller_manager, dir, kubeconfig, extra)
        )
    }

    /// A client authenticated as the admin (group `system:masters`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.servers().kubeconfig
    }

    /// The CA that signed the API server's and the admin's certificates (reuse it for more).
    pub fn pki(&self) -> &Pki {
        &self.servers().pki
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.servers().server
    }

    /// How long starting this control plane took (when it was first started, if lent).
    pub fn startup_time(&self) -> Duration {
        self.servers().startup
    }

    /// The control plane's temporary directory (logs, PKI, kubeconfig).
    pub fn dir(&self) -> &Path {
        self.servers().dir.path()
    }

    /// Deletes the CRD `name` (e.g. `machineosbuilds.machineconfiguration.openshift.io`) and waits
    /// until it is gone: the API it served disappears.
    pub async fn remove_crd(&self, name: &str) -> Result<()> {
        self.not_reusable();
        let out = self.kubectl(["delete", "crd", name, "--wait=true"]).await?;
        if out.success() {
            Ok(())
        } else {
            Err(format!("kubectl delete crd {name}: {out:?}").into())
        }
    }

    /// Applies `tests/crds/FILE` (e.g. `machineosbuilds.yaml`) again.
    pub async fn restore_crd(&self, file: &str) -> Result<()> {
        self.not_reusable();
        let path = crate::repo_root().join("tests/crds").join(file);
        let out = self
            .kubectl([OsStr::new("apply"), OsStr::new("-f"), path.as_os_str()])
            .await?;
        if out.success() {
            Ok(())
        } else {
            Err(format!("kubectl apply -f {}: {out:?}", path.display()).into())
        }
    }

    /// Kills kube-apiserver with SIGKILL (a crash: no graceful shutdown); connections to it
    /// are reset and new ones refused until [`ControlPlane::start_apiserver_again`].
    pub fn kill_apiserver(&self) {
        self.not_reusable();
        lock(&self.servers().apiserver).kill();
        tracing::info!("control plane: killed kube-apiserver");
    }

    /// Starts kube-apiserver again on the same port with the same etcd, certificates and
    /// service-account keys (so existing clients and tokens keep working) and waits until its
    /// `/readyz` answers 200; returns how long that took.
    pub async fn start_apiserver_again(&self) -> Result<Duration> {
        self.not_reusable();
        let started = Instant::now();
        let servers = self.servers();
        let mut process = servers.apiserver_spec.spawn()?;
        let https = https_client(&servers.pki.ca_pem())?;
        wait_apiserver_ready(
            &mut process,
            &https,
            &servers.server,
            Duration::from_secs(90),
        )
        .await?;
        *lock(&servers.apiserver) = process;
        let took = started.elapsed();
        tracing::info!("control plane: kube-apiserver serves again after {took:.2?}");
        Ok(took)
    }

    /// [`ControlPlane::kill_apiserver`], then [`ControlPlane::start_apiserver_again`].
    pub async fn restart_apiserver(&self) -> Result<Duration> {
        self.kill_apiserver();
        self.start_apiserver_again().await
    }

    /// Kills etcd with SIGKILL; kube-apiserver keeps running and fails its storage calls.
    pub fn kill_etcd(&self) {
        self.not_reusable();
        lock(&self.servers().etcd).kill();
        tracing::info!("control plane: killed etcd");
    }

    /// Starts etcd again on the same data directory and ports, waits until it is healthy and
    /// kube-apiserver's `/readyz` answers 200 again; returns how long that took.
    pub async fn start_etcd_again(&self) -> Result<Duration> {
        self.not_reusable();
        let started = Instant::now();
        let servers = self.servers();
        let mut process = servers.etcd_spec.spawn()?;
        wait_etcd_ready(&mut process, &servers.etcd_url).await?;
        *lock(&servers.etcd) = process;
        let https = https_client(&servers.pki.ca_pem())?;
        let server = servers.server.clone();
        crate::poll::wait_for(
            || {
                let (https, url) = (https.clone(), format!("{server}/readyz"));
                async move { probe::ready(&https, &url).await.map(Some) }
            },
            Duration::from_secs(90),
            "kube-apiserver /readyz after etcd restarted",
        )
        .await?;
        let took = started.elapsed();
        tracing::info!("control plane: etcd and kube-apiserver serve again after {took:.2?}");
        Ok(took)
    }

    /// Runs `/usr/bin/kubectl --kubeconfig <admin> <args>`.
    pub async fn kubectl<I, S>(&self, args: I) -> Result<KubectlOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_with_stdin(args, None).await
    }

    /// Runs kubectl with `stdin` as its standard input (e.g. for `apply -f -`).
    pub async fn kubectl_with_stdin<I, S>(
        &self,
        args: I,
        stdin: Option<&str>,
    ) -> Result<KubectlOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let cache = self.dir().join("kubectl-cache");
        kubectl::run(self.kubeconfig(), &cache, args, stdin).await
    }

    fn servers(&self) -> &Servers {
        // Only Drop takes them.
        self.servers
            .as_ref()
            .unwrap_or_else(|| unreachable!("servers taken before drop"))
    }

    /// What the caller does cannot be undone by a reset: stop this control plane when dropped.
    fn not_reusable(&self) {
        self.reusable.store(false, Ordering::Relaxed);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(servers) = self.servers.take()
            && self.reusable.load(Ordering::Relaxed)
        {
            pool::give_back(servers);
        }
    }
}

fn lock(process: &Mutex<ChildProcess>) -> std::sync::MutexGuard<'_, ChildProcess> {
    process.lock().unwrap_or_else(|p| p.into_inner())
}

/// A kube client from a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}
