//! A real CNCF distribution registry on 127.0.0.1 with filesystem storage and deletes enabled.

use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binaries::binaries;
use crate::net::{free_port, retry_start};
use crate::process::ChildProcess;
use crate::registry_client::{ManifestCopy, RegistryClient};
use crate::{Result, init_tracing, temp_dir};

/// A running registry; stops (and its storage is removed) on Drop.
#[derive(Debug)]
pub struct Registry {
    process: ChildProcess,
    client: RegistryClient,
    host: String,
    storage: std::path::PathBuf,
    // Dropped last: the process must be gone before its storage is removed.
    _dir: TempDir,
}

impl Registry {
    /// Starts the registry on a free port and waits until `GET /v2/` answers 200.
    pub async fn start() -> Result<Self> {
        retry_start("registry", Self::start_once).await
    }

    async fn start_once() -> Result<Self> {
        init_tracing();
        let started = Instant::now();
        let bins = tokio::task::spawn_blocking(binaries).await??;
        let dir = temp_dir("mosc-guard-registry-")?;
        let port = free_port()?;
        let host = format!("127.0.0.1:{port}");
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage)?;
        let config = write_config(dir.path(), &storage, &host, "", "", true)?;
        let cmd = registry_command(&bins.registry, &config);
        let mut process = ChildProcess::spawn("registry", cmd, &dir.path().join("registry.log"))?;
        let client = RegistryClient::new(&host)?;
        let probe_client = client.clone();
        process
            .wait_ready(
                "GET /v2/",
                Duration::from_secs(30),
                Duration::from_millis(50),
                || {
                    let c = probe_client.clone();
                    async move { c.ping().await }
                },
            )
            .await?;
        tracing::info!("registry ready at {host} in {:.2?}", started.elapsed());
        Ok(Self {
            process,
            client,
            host,
            storage,
            _dir: dir,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// An HTTP client for this registry's API.
    pub fn client(&self) -> &RegistryClient {
        &self.client
    }

    /// The registry's log file.
    pub fn log_path(&self) -> &std::path::Path {
        self.process.log_path()
    }

    /// Pushes a small random image as `repo:tag`; returns its manifest digest `sha256:<hex>`.
    pub async fn push_image(&self, repo: &str, tag: &str) -> Result<String> {
        self.client.push_image(repo, tag).await
    }

    /// `None` when the manifest exists, else the registry's error (`MANIFEST_UNKNOWN: manifest unknown`).
    pub async fn manifest_status(&self, repo: &str, reference: &str) -> Result<Option<String>> {
        self.client.manifest_status(repo, reference).await
    }

    /// Pulls a manifest; on failure returns the registry's error message (e.g. `manifest unknown`).
    pub async fn pull_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> std::result::Result<(), String> {
        self.client.pull_manifest(repo, reference).await
    }

    /// Deletes a manifest by digest; `Ok(false)` when it was already gone.
    pub async fn delete_manifest(&self, repo: &str, digest: &str) -> Result<bool> {
        self.client.delete_manifest(repo, digest).await
    }

    /// A copy of manifest `repo@digest`, to [`Registry::restore`] after a delete.
    pub async fn copy_manifest(&self, repo: &str, digest: &str) -> Result<ManifestCopy> {
        self.client.copy_manifest(repo, digest).await
    }

    /// Puts a deleted manifest back: its digest is served again (a tag restored from a backup).
    pub async fn restore(&self, copy: &ManifestCopy) -> Result<()> {
        self.client.restore(copy).await
    }

    /// A second registry on the same storage, as nodes reach a production one: HTTPS with
    /// `serving`'s certificate and Docker token auth against `token` (distribution's
    /// `auth.token`). What this (plain, open) registry pushes or deletes, the secure one serves
    /// or has lost at once: a deletion here is a deletion behind the guard's back, as a
    /// retention policy makes it.
    pub async fn secure_front(
        &self,
        serving: &crate::pki::CertPair,
        token: &crate::https_stub::TokenServer,
    ) -> Result<SecureRegistry> {
        self.secure_front_with(serving, token, true).await
    }

    /// [`Registry::secure_front`], with deletes allowed or not (`storage.delete.enabled`:
    /// distribution's default is off, and it then answers every delete `405 UNSUPPORTED`).
    pub async fn secure_front_with(
        &self,
        serving: &crate::pki::CertPair,
        token: &crate::https_stub::TokenServer,
        deletes: bool,
    ) -> Result<SecureRegistry> {
        retry_start("secure registry", || {
            self.secure_front_once(serving, token, deletes)
        })
        .await
    }

    async fn secure_front_once(
        &self,
        serving: &crate::pki::CertPair,
        token: &crate::https_stub::TokenServer,
        deletes: bool,
    ) -> Result<SecureRegistry> {
        let bins = tokio::task::spawn_blocking(binaries).await??;
        let dir = temp_dir("mosc-guard-secure-registry-")?;
        let port = free_port()?;
        let host = format!("127.0.0.1:{port}");
        let bundle = dir.path().join("token-signer.crt");
        std::fs::write(&bundle, token.cert_pem())?;
        let auth = format!(
            "auth:\n  token:\n    realm: {realm}\n    service: {service}\n    issuer: {issuer}\n    rootcertbundle: {bundle}\n",
            realm = token.realm(),
            service = crate::https_stub::SERVICE,
            issuer = crate::https_stub::ISSUER,
            bundle = bundle.display(),
        );
        let tls = format!(
            "  tls:\n    certificate: {cert}\n    key: {key}\n",
            cert = serving.cert.display(),
            key = serving.key.display(),
        );
        let config = write_config(dir.path(), &self.storage, &host, &auth, &tls, deletes)?;
        let cmd = registry_command(&bins.registry, &config);
        let mut process =
            ChildProcess::spawn("secure-registry", cmd, &dir.path().join("registry.log"))?;
        let probe_host = host.clone();
        process
            .wait_ready(
                "TCP connect",
                Duration::from_secs(30),
                Duration::from_millis(50),
                || {
                    let h = probe_host.clone();
                    async move {
                        tokio::net::TcpStream::connect(&h)
                            .await
                            .map(|_| ())
                            .map_err(Into::into)
                    }
                },
            )
            .await?;
        Ok(SecureRegistry {
            process,
            host,
            _dir: dir,
        })
    }
}

/// Writes `dir/config.yml`: filesystem `storage` with deletes allowed or not, listening on
/// `host`, with `auth` (a top-level section, or empty) and `http_extra` (lines under `http:`,
/// or empty).
fn write_config(
    dir: &std::path::Path,
    storage: &std::path::Path,
    host: &str,
    auth: &str,
    http_extra: &str,
    deletes: bool,
) -> Result<std::path::PathBuf> {
    let config = dir.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\n\
             log:\n  level: info\n  formatter: text\n\
             storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: {deletes}\n\
             \x20 maintenance:\n    uploadpurging:\n      enabled: false\n\
             {auth}\
             http:\n  addr: {host}\n  secret: mosc-guard-e2e-not-secret\n{http_extra}",
            storage = storage.display(),
        ),
    )?;
    Ok(config)
}

/// `registry serve CONFIG`, without OpenTelemetry (distribution v3 exports traces by default;
/// there is no collector here).
fn registry_command(bin: &std::path::Path, config: &std::path::Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg(config)
        .env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_SDK_DISABLED", "true");
    cmd
}

/// The HTTPS, token-authenticated face of a [`Registry`]'s storage; stops on Drop.
#[derive(Debug)]
pub struct SecureRegistry {
    process: ChildProcess,
    host: String,
    _dir: TempDir,
}

impl SecureRegistry {
    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its log file.
    pub fn log_path(&self) -> &std::path::Path {
        self.process.log_path()
    }
}
