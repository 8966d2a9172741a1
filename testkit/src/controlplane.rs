//! A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver with the harness's MCO CRDs
//! installed, and kube-controller-manager running only its garbage collector (which finishes
//! `foregroundDeletion`, the MOSBs' finalizer, and deletes MOSBs whose MOSC is gone). No
//! scheduler and no other controllers: nodes are plain objects and MCO is simulated.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use crate::kubectl::KubectlOutput;

use crate::binaries::binaries;
use crate::net::{free_port, retry_on_port_clash};
use crate::pki::Pki;
use crate::probe;
use crate::process::ChildProcess;
use crate::tls::{ensure_crypto_provider, https_client};
use crate::{Result, init_tracing, temp_dir};
use crate::{crds, kubectl};

/// Field manager the harness uses for server-side apply (defined with the CRDs it first applies).
pub use crate::crds::FIELD_MANAGER;

/// A running etcd + kube-apiserver + garbage collector. Dropping it stops all three and removes
/// their data.
pub struct ControlPlane {
    // Fields drop in order: the garbage collector, then the API server, then etcd, the directory last.
    _controller_manager: ChildProcess,
    // Behind locks so a chaos test can kill and restart them while others use the control
    // plane through `&self` (clients reconnect to the same port).
    apiserver: Mutex<ChildProcess>,
    etcd: Mutex<ChildProcess>,
    apiserver_spec: Respawn,
    etcd_spec: Respawn,
    etcd_url: String,
    client: kube::Client,
    pki: Pki,
    kubeconfig: PathBuf,
    server: String,
    startup: Duration,
    dir: TempDir,
}

/// The OpenShift release a control plane says it runs (its ClusterVersion) unless a test sets
/// another with [`ControlPlane::set_release`]: the one the simulator's default builder models.
pub const DEFAULT_RELEASE: &str = "4.20.8";

/// Creates or updates the ClusterVersion `version` so that `status.desired.version` is
/// `version`, as the cluster-version operator writes it.
async fn set_release(client: &kube::Client, version: &str) -> Result<()> {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::core::{ApiResource, GroupVersionKind};
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let object = serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": {"clusterID": "00000000-0000-4000-8000-000000000e2e", "channel": "stable"},
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch("version", &params, &Patch::Apply(&object))
        .await?;
    let status = serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {"desired": {"version": version},
                   "history": [{"state": "Completed", "version": version}]},
    });
    api.patch_status("version", &params, &Patch::Apply(&status))
        .await?;
    Ok(())
}

impl ControlPlane {
    /// Makes the cluster say it runs OpenShift `version` (its ClusterVersion), as after an
    /// upgrade: the guard decides with that release's rules.
    pub async fn set_release(&self, version: &str) -> Result<()> {
        set_release(&self.client, version).await
    }

    /// Starts etcd and kube-apiserver on free ports, writes an admin kubeconfig, waits for
    /// `/readyz`, applies the CRDs in `tests/crds/`, waits until they are Established and warms
    /// them up (see [`crds::install`]), so the first test requests are not slowed down.
    pub async fn start() -> Result<Self> {
        retry_on_port_clash("control plane", || Self::start_once(None, &[])).await
    }

    /// Like [`ControlPlane::start`], with kube-apiserver's `--admission-control-config-file`
    /// set to `config` (e.g. a WebhookAdmissionConfiguration giving the API server a client
    /// certificate to present to a webhook).
    pub async fn start_with_admission_config(config: &Path) -> Result<Self> {
        retry_on_port_clash("control plane", || Self::start_once(Some(config), &[])).await
    }

    /// Like [`ControlPlane::start`], with extra etcd flags (e.g. a larger
    /// `--max-request-bytes`, as some clusters configure).
    pub async fn start_with_etcd_args(etcd_args: &[&str]) -> Result<Self> {
        retry_on_port_clash("control plane", || Self::start_once(None, etcd_args)).await
    }

    async fn start_once(admission_config: Option<&Path>, etcd_args: &[&str]) -> Result<Self> {
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
        crds::install(&client).await?;
        set_release(&client, DEFAULT_RELEASE).await?;
        let crds_ready = started.elapsed();
        // After the CRDs, so the garbage collector's first discovery already monitors them.
        let controller_manager =
            start_garbage_collector(&bins.kube_controller_manager, dir.path(), &kubeconfig).await?;
        let startup = started.elapsed();
        tracing::info!(
            "control plane ready at {server} in {startup:.2?} (etcd {etcd_ready:.2?}, \
             kube-apiserver /readyz {apiserver_ready:.2?}, CRDs established and warm {:.2?}, \
             garbage collector synced {:.2?})",
            crds_ready - apiserver_ready,
            startup - crds_ready
        );
        Ok(Self {
            _controller_manager: controller_manager,
            apiserver: Mutex::new(apiserver),
            etcd: Mutex::new(etcd),
            apiserver_spec,
            etcd_spec,
            etcd_url,
            client,
            pki,
            kubeconfig,
            server,
            startup,
            dir,
        })
    }

    /// A client authenticated as the admin (group `system:masters`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The CA that signed the API server's and the admin's certificates (reuse it for more).
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// How long [`ControlPlane::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The control plane's temporary directory (logs, PKI, kubeconfig).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Deletes the CRD `name` (e.g. `machineosbuilds.machineconfiguration.openshift.io`) and waits
    /// until it is gone: the API it served disappears.
    pub async fn remove_crd(&self, name: &str) -> Result<()> {
        let out = self.kubectl(["delete", "crd", name, "--wait=true"]).await?;
        if out.success() {
            Ok(())
        } else {
            Err(format!("kubectl delete crd {name}: {out:?}").into())
        }
    }

    /// Applies `tests/crds/FILE` (e.g. `machineosbuilds.yaml`) again.
    pub async fn restore_crd(&self, file: &str) -> Result<()> {
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
        lock(&self.apiserver).kill();
        tracing::info!("control plane: killed kube-apiserver");
    }

    /// Starts kube-apiserver again on the same port with the same etcd, certificates and
    /// service-account keys (so existing clients and tokens keep working) and waits until its
    /// `/readyz` answers 200; returns how long that took.
    pub async fn start_apiserver_again(&self) -> Result<Duration> {
        let started = Instant::now();
        let mut process = self.apiserver_spec.spawn()?;
        let https = https_client(&self.pki.ca_pem())?;
        wait_apiserver_ready(&mut process, &https, &self.server, Duration::from_secs(90)).await?;
        *lock(&self.apiserver) = process;
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
        lock(&self.etcd).kill();
        tracing::info!("control plane: killed etcd");
    }

    /// Starts etcd again on the same data directory and ports, waits until it is healthy and
    /// kube-apiserver's `/readyz` answers 200 again; returns how long that took.
    pub async fn start_etcd_again(&self) -> Result<Duration> {
        let started = Instant::now();
        let mut process = self.etcd_spec.spawn()?;
        wait_etcd_ready(&mut process, &self.etcd_url).await?;
        *lock(&self.etcd) = process;
        let https = https_client(&self.pki.ca_pem())?;
        let server = self.server.clone();
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
        let cache = self.dir.path().join("kubectl-cache");
        kubectl::run(&self.kubeconfig, &cache, args, stdin).await
    }
}

/// How to start one server again exactly as before (same flags, ports, files, log).
struct Respawn {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
}

impl Respawn {
    fn spawn(&self) -> Result<ChildProcess> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        ChildProcess::spawn(self.name, cmd, &self.log)
    }
}

fn lock(process: &Mutex<ChildProcess>) -> std::sync::MutexGuard<'_, ChildProcess> {
    process.lock().unwrap_or_else(|p| p.into_inner())
}

/// etcd on free client and peer ports: how to start it, and its client URL.
fn etcd_spec(bin: &Path, dir: &Path, extra: &[&str]) -> Result<(Respawn, String)> {
    let client_url = format!("http://127.0.0.1:{}", free_port()?);
    let peer_url = format!("http://127.0.0.1:{}", free_port()?);
    let mut args: Vec<OsString> = vec![
        "--name=e2e".into(),
        format!("--data-dir={}", dir.join("etcd").display()).into(),
        format!("--listen-client-urls={client_url}").into(),
        format!("--advertise-client-urls={client_url}").into(),
        format!("--listen-peer-urls={peer_url}").into(),
        format!("--initial-advertise-peer-urls={peer_url}").into(),
        format!("--initial-cluster=e2e={peer_url}").into(),
        "--unsafe-no-fsync".into(),
        "--log-level=warn".into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    let spec = Respawn {
        name: "etcd",
        program: bin.to_owned(),
        args,
        log: dir.join("etcd.log"),
    };
    Ok((spec, client_url))
}

/// Waits until etcd reports itself healthy.
async fn wait_etcd_ready(etcd: &mut ChildProcess, etcd_url: &str) -> Result<()> {
    let http = crate::tls::http_client()?;
    etcd.wait_ready(
        "GET /health",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            let (http, url) = (http.clone(), format!("{etcd_url}/health"));
            async move {
                let body = http.get(url).send().await?.text().await?;
                if body.contains("\"health\":\"true\"") {
                    Ok(())
                } else {
                    Err(format!("etcd /health: {body}").into())
                }
            }
        },
    )
    .await
}

/// Waits until kube-apiserver's `/readyz` answers 200.
async fn wait_apiserver_ready(
    apiserver: &mut ChildProcess,
    https: &reqwest::Client,
    server: &str,
    timeout: Duration,
) -> Result<()> {
    apiserver
        .wait_ready("GET /readyz", timeout, Duration::from_millis(100), || {
            let (https, url) = (https.clone(), format!("{server}/readyz"));
            async move { probe::ready(&https, &url).await }
        })
        .await
}

/// kube-apiserver on `port` with client-certificate auth and RBAC: how to start it (its
/// serving certificate and service-account keys are written now, once).
fn apiserver_spec(
    bin: &Path,
    dir: &Path,
    pki: &Pki,
    port: u16,
    etcd_url: &str,
    admission_config: Option<&Path>,
) -> Result<Respawn> {
    let serving = pki.server_cert(
        "kube-apiserver",
        &[
            "127.0.0.1",
            "localhost",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ],
    )?;
    // Service-account token signing key pair.
    let sa_key = rcgen::KeyPair::generate()?;
    let sa_private = dir.join("sa.key");
    let sa_public = dir.join("sa.pub");
    std::fs::write(&sa_private, sa_key.serialize_pem())?;
    std::fs::write(&sa_public, sa_key.public_key_pem())?;
    let cert_dir = dir.join("apiserver-certs");
    std::fs::create_dir_all(&cert_dir)?;

    let mut cmd = Command::new(bin);
    cmd.arg(format!("--etcd-servers={etcd_url}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--cert-dir={}", cert_dir.display()))
        .arg(format!("--tls-cert-file={}", serving.cert.display()))
        .arg(format!("--tls-private-key-file={}", serving.key.display()))
        .arg(format!("--client-ca-file={}", pki.ca_path().display()))
        .arg(format!(
            "--service-account-key-file={}",
            sa_public.display()
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            sa_private.display()
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
        .arg("--service-cluster-ip-range=10.0.0.0/24")
        .arg("--authorization-mode=RBAC")
        // No service-account token controller runs (the controller-manager runs only the GC).
        .arg("--disable-admission-plugins=ServiceAccount")
        .arg("--allow-privileged=true")
        // The API server's own Endpoints reconciler rejects a loopback advertise address.
        .arg("--endpoint-reconciler-type=none")
        .arg("--v=1");
    if let Some(config) = admission_config {
        cmd.arg(format!(
            "--admission-control-config-file={}",
            config.display()
        ));
    }
    Ok(Respawn {
        name: "kube-apiserver",
        program: bin.to_owned(),
        args: cmd.get_args().map(OsStr::to_owned).collect(),
        log: dir.join("kube-apiserver.log"),
    })
}

/// Log line of kube-controller-manager once the garbage collector watches every resource.
const GC_SYNCED: &str = "Garbage collector: all resource monitors have synced";

/// Starts kube-controller-manager with only the garbage collector, as the admin, on a free
/// loopback port, and waits until its resource monitors have synced (before that, owner
/// references and `foregroundDeletion` would go unnoticed for a moment).
async fn start_garbage_collector(
    bin: &Path,
    dir: &Path,
    kubeconfig: &Path,
) -> Result<ChildProcess> {
    let cert_dir = dir.join("controller-manager-certs");
    std::fs::create_dir_all(&cert_dir)?;
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--controllers=garbagecollector")
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg(format!("--cert-dir={}", cert_dir.display()))
        .arg("--use-service-account-credentials=false")
        .arg("--v=2");
    let log = dir.join("kube-controller-manager.log");
    let mut process = ChildProcess::spawn("kube-controller-manager", cmd, &log)?;
    process
        .wait_ready(
            "garbage collector synced",
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let log = log.clone();
                async move {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    if text.contains(GC_SYNCED) {
                        Ok(())
                    } else {
                        Err(format!("no {GC_SYNCED:?} in its log yet").into())
                    }
                }
            },
        )
        .await?;
    Ok(process)
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
