//! A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver with the harness's MCO CRDs
//! installed, and kube-controller-manager running only its garbage collector (which finishes
//! `foregroundDeletion`, the MOSBs' finalizer, and deletes MOSBs whose MOSC is gone). No
//! scheduler and no other controllers: nodes are plain objects and MCO is simulated.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub use super::kubectl::KubectlOutput;

use super::binaries::binaries;
use super::net::{free_port, retry_on_port_clash};
use super::pki::Pki;
use super::process::ChildProcess;
use super::tls::{ensure_crypto_provider, https_client};
use super::{Result, init_tracing, temp_dir};
use super::{crds, kubectl};

/// Field manager the harness uses for server-side apply.
pub const FIELD_MANAGER: &str = "mosc-guard-e2e";

/// A running etcd + kube-apiserver + garbage collector. Dropping it stops all three and removes
/// their data.
pub struct ControlPlane {
    // Fields drop in order: the garbage collector, then the API server, then etcd, the directory last.
    controller_manager: ChildProcess,
    apiserver: ChildProcess,
    etcd: ChildProcess,
    client: kube::Client,
    pki: Pki,
    kubeconfig: PathBuf,
    server: String,
    startup: Duration,
    dir: TempDir,
}

impl ControlPlane {
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

        let (mut etcd, etcd_url) = start_etcd(&bins.etcd, dir.path(), etcd_args)?;
        let http = super::tls::http_client()?;
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
        .await?;
        let etcd_ready = started.elapsed();

        let port = free_port()?;
        let server = format!("https://127.0.0.1:{port}");
        let mut apiserver = start_apiserver(
            &bins.kube_apiserver,
            dir.path(),
            &pki,
            port,
            &etcd_url,
            admission_config,
        )?;
        let https = https_client(&pki.ca_pem())?;
        apiserver
            .wait_ready(
                "GET /readyz",
                Duration::from_secs(90),
                Duration::from_millis(100),
                || {
                    let (https, url) = (https.clone(), format!("{server}/readyz"));
                    async move {
                        let resp = https.get(url).send().await?;
                        let status = resp.status();
                        if status.is_success() {
                            Ok(())
                        } else {
                            let body = resp.text().await.unwrap_or_default();
                            let failing: Vec<&str> =
                                body.lines().filter(|l| l.contains("[-]")).collect();
                            Err(format!("/readyz {status}: {}", failing.join("; ")).into())
                        }
                    }
                },
            )
            .await?;
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
            controller_manager,
            apiserver,
            etcd,
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

    /// The kube-apiserver log file.
    pub fn apiserver_log(&self) -> &Path {
        self.apiserver.log_path()
    }

    /// The kube-controller-manager (garbage collector) log file.
    pub fn controller_manager_log(&self) -> &Path {
        self.controller_manager.log_path()
    }

    /// The etcd log file.
    pub fn etcd_log(&self) -> &Path {
        self.etcd.log_path()
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

/// Starts etcd on free client and peer ports; returns it and its client URL.
fn start_etcd(bin: &Path, dir: &Path, extra: &[&str]) -> Result<(ChildProcess, String)> {
    let client_url = format!("http://127.0.0.1:{}", free_port()?);
    let peer_url = format!("http://127.0.0.1:{}", free_port()?);
    let mut cmd = Command::new(bin);
    cmd.arg("--name=e2e")
        .arg(format!("--data-dir={}", dir.join("etcd").display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=e2e={peer_url}"))
        .arg("--unsafe-no-fsync")
        .arg("--log-level=warn")
        .args(extra);
    let process = ChildProcess::spawn("etcd", cmd, &dir.join("etcd.log"))?;
    Ok((process, client_url))
}

/// Starts kube-apiserver on `port` with client-certificate auth and RBAC.
fn start_apiserver(
    bin: &Path,
    dir: &Path,
    pki: &Pki,
    port: u16,
    etcd_url: &str,
    admission_config: Option<&Path>,
) -> Result<ChildProcess> {
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
    ChildProcess::spawn("kube-apiserver", cmd, &dir.join("kube-apiserver.log"))
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
