//! Minimal OCI distribution API client (plain HTTP): push a real small image, read, delete.

use std::io::Read;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::Result;
use crate::tls::http_client;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Client for one registry host (`127.0.0.1:PORT`), speaking plain HTTP.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    host: String,
    http: reqwest::Client,
}

/// A manifest as the registry served it, to put back after a delete ([`RegistryClient::restore`]):
/// a delete removes the manifest only, and the kit's registries never collect the blobs it
/// named, so putting the same bytes back serves the same digest again, as restoring a tag from
/// a backup or a registry's tag history does.
#[derive(Debug, Clone)]
pub struct ManifestCopy {
    pub repo: String,
    pub digest: String,
    media_type: String,
    bytes: Vec<u8>,
}

/// An error answer of the registry API: `{"errors":[{"code","message"}]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} (HTTP {})", self.code, self.message, self.status)
    }
}

impl std::error::Error for ApiError {}

impl RegistryClient {
    /// A client for `host` (`127.0.0.1:PORT`).
    pub fn new(host: &str) -> Result<Self> {
        Ok(Self {
            host: host.to_owned(),
            http: http_client()?,
        })
    }

    /// The registry host.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/v2/{path}", self.host)
    }

    /// Ok when `GET /v2/` answers 200.
    pub async fn ping(&self) -> Result<()> {
        let resp = self.http.get(self.url("")).send().await?;
        match resp.status() {
            StatusCode::OK => Ok(()),
            other => Err(format!("GET /v2/ answered {other}").into()),
        }
    }

    /// Pushes a real, small image as `repo:tag`: one uncompressed tar layer with random content,
    /// an OCI image config and an OCI image manifest. Returns the manifest digest `sha256:<hex>`.
    pub async fn push_image(&self, repo: &str, tag: &str) -> Result<String> {
        let layer = random_tar_layer()?;
        let layer_digest = sha256_digest(&layer);
        let config = serde_json::to_vec(&json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {"io.mosc-guard.e2e": "true"}},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": "mosc-guard e2e harness"}],
        }))?;
        let config_digest = sha256_digest(&config);
        self.upload_blob(repo, &layer, &layer_digest).await?;
        self.upload_blob(repo, &config, &config_digest).await?;
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": OCI_LAYER_TAR, "digest": layer_digest, "size": layer.len()}],
        }))?;
        let digest = sha256_digest(&manifest);
        let resp = self
            .http
            .put(self.url(&format!("{repo}/manifests/{tag}")))
            .header(CONTENT_TYPE, OCI_MANIFEST)
            .body(manifest)
            .send()
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(api_error(resp).await.into());
        }
        let answered = resp
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if answered != digest {
            return Err(
                format!("registry stored manifest as {answered:?}, expected {digest}").into(),
            );
        }
        Ok(digest)
    }

    /// Monolithic blob upload: `POST /v2/<repo>/blobs/uploads/`, then `PUT <location>&digest=`.
    async fn upload_blob(&self, repo: &str, data: &[u8], digest: &str) -> Result<()> {
        let resp = self
            .http
            .post(self.url(&format!("{repo}/blobs/uploads/")))
            .send()
            .await?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(api_error(resp).await.into());
        }
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or("blob upload answer has no Location header")?;
        let mut url = if location.starts_with("http://") || location.starts_with("https://") {
            location.to_owned()
        } else {
            format!("http://{}{location}", self.host)
        };
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&format!("digest={}", digest.replace(':', "%3A")));
        let resp = self
            .http
            .put(url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(data.to_vec())
            .send()
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(api_error(resp).await.into());
        }
        Ok(())
    }

    /// `GET /v2/<repo>/manifests/<reference>`: `Ok(Ok(()))` when present, `Ok(Err(ApiError))` when
    /// the registry refuses, `Err` when it cannot be reached.
    pub async fn get_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<std::result::Result<(), ApiError>> {
        let resp = self
            .http
            .get(self.url(&format!("{repo}/manifests/{reference}")))
            .header(ACCEPT, ACCEPT_MANIFESTS)
            .send()
            .await?;
        if resp.status() == StatusCode::OK {
            let _ = resp.bytes().await?;
            Ok(Ok(()))
        } else {
            Ok(Err(api_error(resp).await))
        }
    }

    /// `None` when the manifest exists, else the registry's error as `CODE: message`
    /// (e.g. `MANIFEST_UNKNOWN: manifest unknown`).
    pub async fn manifest_status(&self, repo: &str, reference: &str) -> Result<Option<String>> {
        Ok(self
            .get_manifest(repo, reference)
            .await?
            .err()
            .map(|e| format!("{}: {}", e.code, e.message)))
    }

    /// Pulls a manifest; on failure the registry's error message (e.g. `manifest unknown`), or the
    /// transport error.
    pub async fn pull_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> std::result::Result<(), String> {
        match self.get_manifest(repo, reference).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.message),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The digest a tag (or digest) resolves to, `None` when unknown.
    pub async fn resolve(&self, repo: &str, reference: &str) -> Result<Option<String>> {
        let resp = self
            .http
            .head(self.url(&format!("{repo}/manifests/{reference}")))
            .header(ACCEPT, ACCEPT_MANIFESTS)
            .send()
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(resp
                .headers()
                .get("Docker-Content-Digest")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)),
            StatusCode::NOT_FOUND => Ok(None),
            other => Err(format!("HEAD manifest {repo}:{reference} answered {other}").into()),
        }
    }

    /// A copy of manifest `repo@digest` ([`ManifestCopy`]).
    pub async fn copy_manifest(&self, repo: &str, digest: &str) -> Result<ManifestCopy> {
        let resp = self
            .http
            .get(self.url(&format!("{repo}/manifests/{digest}")))
            .header(ACCEPT, ACCEPT_MANIFESTS)
            .send()
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(api_error(resp).await.into());
        }
        let media_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(OCI_MANIFEST)
            .to_owned();
        let bytes = resp.bytes().await?.to_vec();
        if sha256_digest(&bytes) != digest {
            return Err(
                format!("the manifest served for {repo}@{digest} has another digest").into(),
            );
        }
        Ok(ManifestCopy {
            repo: repo.to_owned(),
            digest: digest.to_owned(),
            media_type,
            bytes,
        })
    }

    /// Puts `copy` back (`PUT /v2/<repo>/manifests/<digest>`): the registry serves its digest
    /// again.
    pub async fn restore(&self, copy: &ManifestCopy) -> Result<()> {
        let resp = self
            .http
            .put(self.url(&format!("{}/manifests/{}", copy.repo, copy.digest)))
            .header(CONTENT_TYPE, &copy.media_type)
            .body(copy.bytes.clone())
            .send()
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(api_error(resp).await.into());
        }
        Ok(())
    }

    /// `DELETE /v2/<repo>/manifests/<digest>`; `Ok(false)` when the manifest was already gone.
    pub async fn delete_manifest(&self, repo: &str, digest: &str) -> Result<bool> {
        let resp = self
            .http
            .delete(self.url(&format!("{repo}/manifests/{digest}")))
            .send()
            .await?;
        match resp.status() {
            StatusCode::ACCEPTED | StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(api_error(resp).await.into()),
        }
    }
}

/// Reads the registry's error body into an [`ApiError`] (falling back to the raw body).
async fn api_error(resp: reqwest::Response) -> ApiError {
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    let first = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("errors")?.as_array()?.first().cloned());
    let field = |name: &str| {
        first
            .as_ref()
            .and_then(|e| e.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    ApiError {
        status,
        code: field("code").unwrap_or_else(|| format!("HTTP_{status}")),
        message: field("message").unwrap_or_else(|| body.trim().to_owned()),
    }
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    let hash = Sha256::digest(data);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A ustar archive holding one small file with random content (so every image is unique).
fn random_tar_layer() -> Result<Vec<u8>> {
    let mut random = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let content = format!("mosc-guard e2e layer {hex}\n").into_bytes();
    let mut header = [0u8; 512];
    let mut put =
        |offset: usize, value: &[u8]| header[offset..offset + value.len()].copy_from_slice(value);
    put(0, b"etc/mosc-guard-e2e-layer");
    put(100, b"0000644\0");
    put(108, b"0000000\0");
    put(116, b"0000000\0");
    put(124, format!("{:011o}\0", content.len()).as_bytes());
    put(136, b"00000000000\0");
    put(148, b"        ");
    put(156, b"0");
    put(257, b"ustar\0");
    put(263, b"00");
    let checksum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..156].copy_from_slice(format!("{checksum:06o}\0 ").as_bytes());
    let mut tar = header.to_vec();
    tar.extend_from_slice(&content);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
    tar.extend_from_slice(&[0u8; 1024]);
    Ok(tar)
}
