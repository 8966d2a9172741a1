//! The real mosc-guard process serving HTTPS on 127.0.0.1, and its registration as the
//! cluster's validating webhook (from the product's own manifest, pointed at that process).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::Resource as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;
use tempfile::TempDir;

use super::controlplane::{ControlPlane, FIELD_MANAGER};
use super::manifests;
use super::net::{free_port, retry_on_port_clash};
use super::process::ChildProcess;
use super::tls::https_client;
use super::{Result, init_tracing, temp_dir};

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
            Self::start_once(cp, kubeconfig, extra_args, None, None)
        })
        .await
    }

    /// Like [`Guard::start_with_args`], listening on `port`, chosen in advance (e.g. to name
    /// `127.0.0.1:PORT` in the API server's admission configuration), and serving probes and
    /// metrics on `metrics_port` (`--metrics-listen`), where its readiness is polled (`port`
    /// may require a client certificate the harness does not have).
    pub async fn start_on_ports(
        cp: &ControlPlane,
        port: u16,
        metrics_port: u16,
        extra_args: &[&str],
    ) -> Result<Self> {
        Self::start_once(
            cp,
            cp.kubeconfig(),
            extra_args,
            Some(port),
            Some(metrics_port),
        )
        .await
    }

    async fn start_once(
        cp: &ControlPlane,
        kubeconfig: &Path,
        extra_args: &[&str],
        port: Option<u16>,
        metrics_port: Option<u16>,
    ) -> Result<Self> {
        init_tracing();
        let started = Instant::now();
        let dir = temp_dir("mosc-guard-guard-")?;
        let port = match port {
            Some(port) => port,
            None => free_port()?,
        };
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
        if let Some(metrics_port) = metrics_port {
            cmd.arg("--metrics-listen")
                .arg(format!("127.0.0.1:{metrics_port}"));
        }
        // No drain delay unless a test asks for one: stopping a guard should not cost 10 s.
        if !extra_args.iter().any(|a| a.starts_with("--shutdown-delay")) {
            cmd.arg("--shutdown-delay=0");
        }
        let process = ChildProcess::spawn("mosc-guard", cmd, &dir.path().join("mosc-guard.log"))?;
        let mut guard = Self {
            process: process.with_stop_grace(Duration::from_secs(5)),
            port,
            ca_pem: cp.pki().ca_pem(),
            dir,
        };
        let https = https_client(&guard.ca_pem)?;
        let url = match metrics_port {
            Some(metrics_port) => format!("https://127.0.0.1:{metrics_port}/readyz"),
            None => format!("{}/readyz", guard.base_url()),
        };
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

    /// Its process id (0 once stopped): a test shows recovery without a restart by the same id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
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

    /// A clientConfig calling `path` on it, trusting its CA.
    pub fn client_config(&self, path: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            url: Some(format!("{}{path}", self.base_url())),
            ca_bundle: Some(ByteString(self.ca_pem.as_bytes().to_vec())),
            service: None,
        }
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

    /// Kills it with SIGKILL, as a crash or a lost node would (no graceful shutdown).
    pub fn kill(&mut self) {
        self.process.kill();
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

/// The product's ValidatingWebhookConfiguration (rendered from `manifests/base`) with each
/// webhook's clientConfig pointed at the guard: `url` = its /validate, `caBundle` = its CA.
pub fn webhook_configuration(guard: &Guard) -> Result<ValidatingWebhookConfiguration> {
    let mut config = manifests::validating_webhook_configuration()?;
    point_each(&mut config.webhooks, |w| {
        w.client_config = guard.client_config("/validate")
    })?;
    Ok(config)
}

/// The product's MutatingWebhookConfiguration (rendered from `manifests/overlays/defer`)
/// pointed at the guard's /mutate.
pub fn mutating_webhook_configuration(guard: &Guard) -> Result<MutatingWebhookConfiguration> {
    let mut config = manifests::mutating_webhook_configuration()?;
    point_each(&mut config.webhooks, |w| {
        w.client_config = guard.client_config("/mutate")
    })?;
    Ok(config)
}

/// Applies `point` to every webhook of a rendered configuration (which must have some).
fn point_each<W>(webhooks: &mut Option<Vec<W>>, point: impl FnMut(&mut W)) -> Result<()> {
    webhooks
        .as_mut()
        .filter(|w| !w.is_empty())
        .ok_or("the rendered configuration has no webhooks")?
        .iter_mut()
        .for_each(point);
    Ok(())
}

/// Applies [`webhook_configuration`] (server-side apply) and waits until the API server calls
/// webhooks from it.
///
/// How "active" is established, independently of the guard's decisions: the API server loads
/// each kind of webhook configuration through one informer, which sees objects in
/// resourceVersion order. After ours is applied, a probe configuration of the same kind is
/// created (so it has a later resourceVersion) whose only webhook matches server-side dry-run
/// creates of Namespaces carrying a unique probe label and points at a closed port with
/// failurePolicy Fail. Once such a dry-run create is rejected by that webhook, the API server's
/// webhook set includes the probe and therefore ours. The probe is then deleted; while its
/// removal propagates it can only affect Namespaces carrying the probe label.
pub async fn register_validating_webhook(cp: &ControlPlane, guard: &Guard) -> Result<()> {
    let config = webhook_configuration(guard)?;
    register(cp, guard, &config, PROBE_VALIDATING).await
}

/// Applies [`mutating_webhook_configuration`] and waits until it is in effect (as
/// [`register_validating_webhook`] does).
pub async fn register_mutating_webhook(cp: &ControlPlane, guard: &Guard) -> Result<()> {
    let config = mutating_webhook_configuration(guard)?;
    register(cp, guard, &config, PROBE_MUTATING).await
}

async fn register<K>(cp: &ControlPlane, guard: &Guard, config: &K, probe: Probe) -> Result<()>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let started = Instant::now();
    let name = config
        .meta()
        .name
        .clone()
        .ok_or("the rendered webhook configuration has no name")?;
    let api: Api<K> = Api::all(cp.client());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(config),
    )
    .await
    .map_err(|e| format!("applying {} {name}: {e}", probe.kind))?;
    wait_until_active(cp, probe, Duration::from_secs(30)).await?;
    tracing::info!(
        "{} {name} -> {} active after {:.2?}",
        probe.kind,
        guard.base_url(),
        started.elapsed()
    );
    Ok(())
}

/// Removes the guard's ValidatingWebhookConfiguration (what `kubectl delete -f` of the manifest does).
pub async fn unregister_validating_webhook(cp: &ControlPlane) -> Result<()> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    let name = manifests::validating_webhook_configuration()?
        .metadata
        .name
        .ok_or("the rendered configuration has no name")?;
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A probe configuration of one kind (see [`register_validating_webhook`]).
#[derive(Clone, Copy)]
struct Probe {
    kind: &'static str,
    plural: &'static str,
    config: &'static str,
    webhook: &'static str,
}

const PROBE_VALIDATING: Probe = Probe {
    kind: "ValidatingWebhookConfiguration",
    plural: "validatingwebhookconfigurations",
    config: "mosc-guard-e2e-probe",
    webhook: "probe.mosc-guard-e2e.dev",
};

const PROBE_MUTATING: Probe = Probe {
    kind: "MutatingWebhookConfiguration",
    plural: "mutatingwebhookconfigurations",
    config: "mosc-guard-e2e-mutating-probe",
    webhook: "mutating-probe.mosc-guard-e2e.dev",
};

const PROBE_LABEL: &str = "mosc-guard-e2e/webhook-probe";

/// Waits until every ValidatingWebhookConfiguration written before this call is in effect
/// (see [`register_validating_webhook`]).
pub async fn wait_until_webhooks_active(cp: &ControlPlane, timeout: Duration) -> Result<()> {
    wait_until_active(cp, PROBE_VALIDATING, timeout).await
}

async fn wait_until_active(cp: &ControlPlane, probe: Probe, timeout: Duration) -> Result<()> {
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", probe.kind),
        probe.plural,
    );
    let configs: Api<DynamicObject> = Api::all_with(cp.client(), &resource);
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": probe.kind,
        "metadata": {"name": probe.config},
        "webhooks": [{
            "name": probe.webhook,
            "admissionReviewVersions": ["v1"],
            // Port 1 on loopback: nothing listens, so the call fails at once.
            "clientConfig": {"url": "https://127.0.0.1:1/probe"},
            "rules": [{
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["namespaces"],
                "scope": "Cluster"
            }],
            "objectSelector": {"matchLabels": {PROBE_LABEL: nonce}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 2
        }]
    }))?;
    // A later resourceVersion than every configuration of this kind written so far.
    configs
        .patch(
            probe.config,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&config),
        )
        .await
        .map_err(|e| format!("applying webhook probe {}: {e}", probe.config))?;

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
            Err(kube::Error::Api(s)) if s.message.contains(probe.webhook) => break Ok(()),
            Ok(_) => {}
            Err(e) => tracing::debug!("webhook probe: {e}"),
        }
        if Instant::now() >= deadline {
            break Err(format!("{}s not in effect after {timeout:?}", probe.kind).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if let Err(e) = configs.delete(probe.config, &DeleteParams::default()).await {
        tracing::warn!("deleting webhook probe configuration: {e}");
    }
    result
}
