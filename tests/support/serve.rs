//! `mosc-guard serve` as a process that a test starts without waiting for readiness, talks to
//! directly (/readyz, /metrics, /validate) and stops with SIGTERM itself, to observe what
//! happens around readiness and shutdown. (`guard::Guard` is the ready-and-registered variant.)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use tempfile::TempDir;

use super::controlplane::ControlPlane;
use super::net::free_port;
use super::process::ChildProcess;
use super::tls::https_client;
use super::{Result, init_tracing, temp_dir};

/// A `mosc-guard serve` process with a serving certificate (SAN 127.0.0.1) from the control
/// plane's CA. Dropping it sends SIGTERM, then SIGKILL after 30 s.
pub struct ServeProcess {
    process: ChildProcess,
    port: u16,
    ca_pem: String,
    http: reqwest::Client,
    _dir: TempDir,
}

impl ServeProcess {
    /// Starts `mosc-guard serve --kubeconfig KUBECONFIG ARGS` on a free port; returns at once.
    pub fn spawn(cp: &ControlPlane, kubeconfig: &Path, args: &[&str]) -> Result<Self> {
        Self::spawn_with(cp, Some(kubeconfig), args)
    }

    /// Starts `mosc-guard serve ARGS` (with `--kubeconfig` if given) on a free port; returns at
    /// once. Without a kubeconfig, `ARGS` must name the source (`--from-dir`).
    pub fn spawn_with(cp: &ControlPlane, kubeconfig: Option<&Path>, args: &[&str]) -> Result<Self> {
        init_tracing();
        let dir = temp_dir("mosc-guard-serve-")?;
        let port = free_port()?;
        let cert = cp
            .pki()
            .server_cert(&format!("mosc-guard-{port}"), &["127.0.0.1"])?;
        let mut cmd = Command::new(super::guard::guard_binary()?);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--tls-cert-file")
            .arg(&cert.cert)
            .arg("--tls-key-file")
            .arg(&cert.key)
            .args(args)
            .env_remove("KUBECONFIG");
        if let Some(kubeconfig) = kubeconfig {
            cmd.arg("--kubeconfig").arg(kubeconfig);
        }
        // No drain delay unless a test asks for one: stopping a guard should not cost 10 s.
        if !args.iter().any(|a| a.starts_with("--shutdown-delay")) {
            cmd.arg("--shutdown-delay=0");
        }
        let process = ChildProcess::spawn("mosc-guard", cmd, &dir.path().join("mosc-guard.log"))?
            .with_stop_grace(Duration::from_secs(30));
        let ca_pem = cp.pki().ca_pem();
        Ok(Self {
            process,
            port,
            http: https_client(&ca_pem)?,
            ca_pem,
            _dir: dir,
        })
    }

    /// The process id (to read its memory from /proc).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The HTTPS client the process trusts (one connection pool).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A new HTTPS client (so a request goes over a new connection).
    pub fn fresh_client(&self) -> Result<reqwest::Client> {
        https_client(&self.ca_pem)
    }

    /// A clientConfig calling `url_base` + `path` (e.g. a forwarder in front of it), trusting
    /// the control plane's CA.
    pub fn client_config_at(&self, url_base: &str, path: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            url: Some(format!("{url_base}{path}")),
            ca_bundle: Some(ByteString(self.ca_pem.as_bytes().to_vec())),
            service: None,
        }
    }

    /// GET `path`: status and body, or `None` if nothing answered.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base_url()))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.unwrap_or_default()))
    }

    /// Waits until GET `path` answers `status`; errs with the last answer and the log tail.
    pub async fn wait_status(&mut self, path: &str, status: u16, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.process.check_running()?;
            let got = self.get(path).await;
            if got.as_ref().is_some_and(|(s, _)| *s == status) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "GET {path} did not answer {status} within {timeout:?} (last: {got:?}); log:\n{}",
                    self.log_tail(40)
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The value of the metric line starting with `series` (e.g. `mosc_guard_ready`).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Sends SIGTERM (as kubelet does when the pod is deleted).
    pub fn sigterm(&self) {
        if let Ok(pid) = libc::pid_t::try_from(self.process.pid()) {
            // SAFETY: kill(2) on our own child, not yet reaped (the handle owns it).
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.process.check_running().is_ok()
    }

    /// Waits until the process has exited; errs after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.running() {
            if Instant::now() >= deadline {
                return Err(format!("still running after {timeout:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.process.log_path()).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// Applies the product's ValidatingWebhookConfiguration (rendered from `manifests/base`) with
/// every webhook calling `url_base` + `/validate` and trusting the control plane's CA (the
/// guard's serving certificate is signed by it), and waits until the API server uses it.
pub async fn register_validating_webhook_at(cp: &ControlPlane, url_base: &str) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, Patch, PatchParams};
    let mut config = super::manifests::validating_webhook_configuration()?;
    let name = config
        .metadata
        .name
        .clone()
        .ok_or("the rendered configuration has no name")?;
    for w in config.webhooks.iter_mut().flatten() {
        w.client_config = WebhookClientConfig {
            url: Some(format!("{url_base}/validate")),
            ca_bundle: Some(ByteString(cp.pki().ca_pem().into_bytes())),
            service: None,
        };
    }
    let api: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    api.patch(
        &name,
        &PatchParams::apply(super::controlplane::FIELD_MANAGER).force(),
        &Patch::Apply(&config),
    )
    .await
    .map_err(|e| format!("applying ValidatingWebhookConfiguration {name}: {e}"))?;
    super::guard::wait_until_webhooks_active(cp, Duration::from_secs(30)).await
}
