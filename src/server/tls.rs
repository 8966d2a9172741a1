//! Serving certificate, reloaded from disk without a restart, and its expiry gauge. The files are
//! re-read by path on a timer, not watched by inode: kubelet swaps a Secret volume's `..data`
//! symlink, which inotify on the old target never reports. Each handshake takes the newest good
//! pair; a pair that does not parse (read mid-rotation) is logged and the last good one stays. The
//! timer also sets the expiry gauge from the certificate in service (not the file), so an alert
//! sees a renewal that never got loaded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, version};

use crate::telemetry::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("building the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The files a certificate pair comes from.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Serves the most recently loaded good certificate pair.
#[derive(Debug)]
pub struct ReloadingResolver {
    files: CertFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    raw: (Vec<u8>, Vec<u8>),
    key: Arc<CertifiedKey>,
}

impl ReloadingResolver {
    /// Loads the pair once; failing here is fatal, since there is nothing to serve.
    pub fn load(files: CertFiles) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let raw = read_pair(&files)?;
        let key = certified_key(&files, &raw, &provider)?;
        Ok(Arc::new(Self {
            files,
            provider,
            current: RwLock::new(Loaded { raw, key }),
        }))
    }

    /// Re-reads the files; returns true when a new pair went into service.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let raw = read_pair(&self.files)?;
        if self.read_current(|c| c.raw == raw) {
            return Ok(false);
        }
        let key = certified_key(&self.files, &raw, &self.provider)?;
        // A poisoned lock only means a panic elsewhere mid-swap; the pair is still whole.
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Loaded { raw, key };
        Ok(true)
    }

    /// Sets the expiry gauge now, then reloads every `interval` until the task is dropped,
    /// setting the gauge again whenever a new pair goes into service.
    pub fn spawn_reloader(
        self: &Arc<Self>,
        interval: Duration,
        metrics: Arc<Metrics>,
    ) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        this.set_expiry(&metrics);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match this.reload() {
                    Ok(true) => {
                        tracing::info!(cert = %this.files.cert.display(), "serving certificate reloaded");
                        this.set_expiry(&metrics);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "serving certificate not reloaded; keeping the previous one")
                    }
                }
            }
        })
    }

    /// Sets the expiry gauge from the certificate handshakes get now; 0 when it cannot be
    /// read, which the alert reports as expiring.
    fn set_expiry(&self, metrics: &Metrics) {
        let expiry = self
            .read_current(|c| c.key.cert.first().cloned())
            .and_then(|der| not_after(der.as_ref()));
        if expiry.is_none() {
            tracing::warn!("cannot read the serving certificate's expiry; reporting 0");
        }
        metrics.set_certificate_expiry(expiry.unwrap_or(0));
    }

    /// A server configuration (TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1) using this resolver. With
    /// `client_ca` (PEM, read once) a client must present a certificate that CA signed, or its
    /// handshake fails.
    pub fn server_config(
        self: &Arc<Self>,
        client_ca: Option<&Path>,
    ) -> Result<ServerConfig, TlsError> {
        let builder = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_protocol_versions(&[&version::TLS13, &version::TLS12])?;
        let builder = match client_ca {
            Some(ca) => builder.with_client_cert_verifier(self.client_verifier(ca)?),
            None => builder.with_no_client_auth(),
        };
        let mut config =
            builder.with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    fn client_verifier(
        &self,
        client_ca: &Path,
    ) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
        let pem = read(client_ca)?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert =
                cert.map_err(|e| parse_err(client_ca, format!("not a PEM certificate: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| parse_err(client_ca, format!("not a usable CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(parse_err(client_ca, "no CA certificate found".into()));
        }
        rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&self.provider),
        )
        .build()
        .map_err(|e| parse_err(client_ca, format!("cannot verify clients with it: {e}")))
    }

    fn read_current<T>(&self, f: impl FnOnce(&Loaded) -> T) -> T {
        f(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.read_current(|c| Arc::clone(&c.key)))
    }
}

/// The notAfter of a DER certificate, in seconds since the Unix epoch; `None` if it does not
/// parse (rustls accepted it, so that would be a certificate rustls reads and x509-parser not).
pub fn not_after(der: &[u8]) -> Option<i64> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .map(|(_, cert)| cert.validity().not_after.timestamp())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_err(path: &Path, reason: String) -> TlsError {
    TlsError::Parse {
        path: path.to_path_buf(),
        reason,
    }
}

fn read_pair(files: &CertFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    Ok((read(&files.cert)?, read(&files.key)?))
}

fn certified_key(
    files: &CertFiles,
    (cert_pem, key_pem): &(Vec<u8>, Vec<u8>),
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| parse_err(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(parse_err(&files.cert, "no certificate found".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| parse_err(&files.key, format!("not a PEM private key: {e}")))?;
    let certified = CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| parse_err(&files.key, format!("key does not fit the certificate: {e}")))?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests;
