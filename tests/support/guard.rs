//! The real mosc-guard process serving HTTPS on 127.0.0.1, and its registration as the
//! cluster's validating webhook (from the product's own manifest, pointed at that process).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tempfile::TempDir;

use super::controlplane::{ControlPlane, FIELD_MANAGER};
use super::net::{free_port, retry_on_port_clash};
use super::process::ChildProcess;
use super::tls::https_client;
use super::{Result, init_tracing, temp_dir};

/// The product's webhook manifest, which [`register_validating_webhook`] applies.
pub const WEBHOOK_MANIFEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/40-validatingwebhook.yaml"
);

/// A running `mosc-guard serve`. Dropping it sends SIGTERM, then SIGKILL after 5 s.
pub struct Guard {
    process: ChildProcess,
    port: u16,
    ca_pem: String,
    dir: TempDir,
}

impl Guard {
    /// Starts `mosc-guard serve` with a serving certificate (SAN 127.0.0.1) from the control
    /// plane's CA and the admin kubeconfig; waits until `GET /readyz` answers 200.
    pub async fn start(cp: &ControlPlane) -> Result<Self> {
        Self::start_with_args(cp, &[]).await
    }

    /// Like [`Guard::start`], with extra `serve` arguments (e.g. `["--policy", "in-use"]`).
    pub async fn start_with_args(cp: &ControlPlane, extra_args: &[&str]) -> Result<Self> {
        Self::start_as(cp, cp.kubeconfig(), extra_args).await
    }

    /// Like [`Guard::start_with_args`], talking to the API server with `kubeconfig` instead of
    /// the admin's (e.g. a ServiceAccount token's, to exercise the product's RBAC).
    pub async fn start_as(
        cp: &ControlPlane,
        kubeconfig: &Path,
        extra_args: &[&str],
    ) -> Result<Self> {
        retry_on_port_clash("mosc-guard", || {
            Self::start_once(cp, kubeconfig, extra_args)
        })
        .await
    }

    async fn start_once(cp: &ControlPlane, kubeconfig: &Path, extra_args: &[&str]) -> Result<Self> {
        init_tracing();
        let started = Instant::now();
        let dir = temp_dir("mosc-guard-guard-")?;
        let port = free_port()?;
        let cert = cp
            .pki()
            .server_cert(&format!("mosc-guard-{port}"), &["127.0.0.1"])?;
        let mut cmd = Command::new(guard_binary()?);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--tls-cert-file")
            .arg(&cert.cert)
            .arg("--tls-key-file")
            .arg(&cert.key)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(extra_args)
            .env_remove("KUBECONFIG");
        let process = ChildProcess::spawn("mosc-guard", cmd, &dir.path().join("mosc-guard.log"))?;
        let mut guard = Self {
            process: process.with_stop_grace(Duration::from_secs(5)),
            port,
            ca_pem: cp.pki().ca_pem(),
            dir,
        };
        let https = https_client(&guard.ca_pem)?;
        let url = format!("{}/readyz", guard.base_url());
        guard
            .process
            .wait_ready(
                "GET /readyz",
                Duration::from_secs(30),
                Duration::from_millis(100),
                || {
                    let (https, url) = (https.clone(), url.clone());
                    async move {
                        let resp = https.get(url).send().await?;
                        let status = resp.status();
                        if status.as_u16() == 200 {
                            Ok(())
                        } else {
                            Err(format!(
                                "/readyz {status}: {}",
                                resp.text().await.unwrap_or_default()
                            )
                            .into())
                        }
                    }
                },
            )
            .await?;
        tracing::info!(
            "mosc-guard ready at {} in {:.2?}",
            guard.base_url(),
            started.elapsed()
        );
        Ok(guard)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `https://127.0.0.1:PORT/validate`, the admission endpoint.
    pub fn validate_url(&self) -> String {
        format!("{}/validate", self.base_url())
    }

    /// PEM of the CA that signed its serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// An HTTPS client trusting its serving certificate (for /metrics, /readyz, ...).
    pub fn https_client(&self) -> Result<reqwest::Client> {
        https_client(&self.ca_pem)
    }

    /// Its log file (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Errs (with the log tail) if the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.process.check_running()
    }

    /// Stops it now: SIGTERM, then SIGKILL after the grace period (also done on Drop).
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// The guard's temporary directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The `mosc-guard` binary to run: cargo's `CARGO_BIN_EXE_mosc-guard` (set when building
/// integration tests), else `$MOSC_GUARD_BIN`, else `mosc-guard` in the target directory of the
/// running executable (examples run from `target/<profile>/examples/`, which cargo does not
/// build the binary for).
pub fn guard_binary() -> Result<PathBuf> {
    if let Some(path) = option_env!("CARGO_BIN_EXE_mosc-guard") {
        return Ok(PathBuf::from(path));
    }
    if let Some(path) = std::env::var_os("MOSC_GUARD_BIN").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("locating the running executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or("the running executable has no directory")?;
    let profile_dir = if dir.ends_with("examples") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let path = profile_dir.join("mosc-guard");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the mosc-guard binary is not built: {} does not exist; run `cargo build --bin mosc-guard` \
             first (same profile), or set MOSC_GUARD_BIN to its path",
            path.display()
        )
        .into())
    }
}

/// The product's ValidatingWebhookConfiguration (`manifests/40-validatingwebhook.yaml`) with each
/// webhook's clientConfig pointed at the guard: `url` = its /validate, `caBundle` = its CA.
pub fn webhook_configuration(guard: &Guard) -> Result<ValidatingWebhookConfiguration> {
    let text = std::fs::read_to_string(WEBHOOK_MANIFEST)
        .map_err(|e| format!("reading {WEBHOOK_MANIFEST}: {e}"))?;
    let mut config: ValidatingWebhookConfiguration =
        serde_yaml_ng::from_str(&text).map_err(|e| format!("parsing {WEBHOOK_MANIFEST}: {e}"))?;
    let webhooks = config
        .webhooks
        .as_mut()
        .filter(|w| !w.is_empty())
        .ok_or("the manifest has no webhooks")?;
    for webhook in webhooks {
        webhook.client_config = WebhookClientConfig {
            url: Some(guard.validate_url()),
            ca_bundle: Some(ByteString(guard.ca_pem().as_bytes().to_vec())),
            service: None,
        };
    }
    Ok(config)
}

/// Applies [`webhook_configuration`] (server-side apply) and waits until the API server calls
/// webhooks from it.
///
/// How "active" is established, independently of the guard's decisions: the API server loads
/// ValidatingWebhookConfigurations through one informer, which sees objects in resourceVersion
/// order. After ours is applied, a second configuration `mosc-guard-e2e-probe` is created (so it
/// has a later resourceVersion) whose only webhook matches server-side dry-run creates of
/// Namespaces carrying a unique probe label and points at a closed port with failurePolicy Fail.
/// Once such a dry-run create is rejected by that webhook, the API server's webhook set includes
/// the probe and therefore ours. The probe configuration is then deleted; while its removal
/// propagates it can only affect Namespaces carrying the probe label.
pub async fn register_validating_webhook(cp: &ControlPlane, guard: &Guard) -> Result<()> {
    let started = Instant::now();
    let config = webhook_configuration(guard)?;
    let name = config
        .metadata
        .name
        .clone()
        .ok_or("the webhook manifest has no name")?;
    let api: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&config),
    )
    .await
    .map_err(|e| format!("applying ValidatingWebhookConfiguration {name}: {e}"))?;
    wait_until_webhooks_active(cp, Duration::from_secs(30)).await?;
    tracing::info!(
        "ValidatingWebhookConfiguration {name} -> {} active after {:.2?}",
        guard.validate_url(),
        started.elapsed()
    );
    Ok(())
}

/// Removes the guard's ValidatingWebhookConfiguration (what `kubectl delete -f` of the manifest does).
pub async fn unregister_validating_webhook(cp: &ControlPlane) -> Result<()> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    let text = std::fs::read_to_string(WEBHOOK_MANIFEST)?;
    let config: ValidatingWebhookConfiguration = serde_yaml_ng::from_str(&text)?;
    let name = config
        .metadata
        .name
        .ok_or("the webhook manifest has no name")?;
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

const PROBE_CONFIG: &str = "mosc-guard-e2e-probe";
const PROBE_WEBHOOK: &str = "probe.mosc-guard-e2e.dev";
const PROBE_LABEL: &str = "mosc-guard-e2e/webhook-probe";

/// Waits until every ValidatingWebhookConfiguration written before this call is in effect
/// (see [`register_validating_webhook`]).
pub async fn wait_until_webhooks_active(cp: &ControlPlane, timeout: Duration) -> Result<()> {
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    let probe = ValidatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta {
            name: Some(PROBE_CONFIG.to_owned()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: PROBE_WEBHOOK.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: WebhookClientConfig {
                // Port 1 on loopback: nothing listens, so the call fails at once.
                url: Some("https://127.0.0.1:1/probe".to_owned()),
                ..Default::default()
            },
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".to_owned()]),
                operations: Some(vec!["CREATE".to_owned()]),
                resources: Some(vec!["namespaces".to_owned()]),
                scope: Some("Cluster".to_owned()),
            }]),
            object_selector: Some(LabelSelector {
                match_labels: Some([(PROBE_LABEL.to_owned(), nonce.clone())].into()),
                ..Default::default()
            }),
            failure_policy: Some("Fail".to_owned()),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(2),
            ..Default::default()
        }]),
    };
    // A later resourceVersion than every configuration written so far.
    configs
        .patch(
            PROBE_CONFIG,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&probe),
        )
        .await
        .map_err(|e| format!("applying webhook probe: {e}"))?;

    let namespaces: Api<Namespace> = Api::all(cp.client());
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("mosc-guard-e2e-probe-{nonce}")),
            labels: Some([(PROBE_LABEL.to_owned(), nonce.clone())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + timeout;
    let result = loop {
        match namespaces.create(&dry_run, &ns).await {
            Err(kube::Error::Api(s)) if s.message.contains(PROBE_WEBHOOK) => break Ok(()),
            Ok(_) => {}
            Err(e) => tracing::debug!("webhook probe: {e}"),
        }
        if Instant::now() >= deadline {
            break Err(format!("webhook configurations not in effect after {timeout:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if let Err(e) = configs.delete(PROBE_CONFIG, &DeleteParams::default()).await {
        tracing::warn!("deleting webhook probe configuration: {e}");
    }
    result
}
