//! rustls set-up for the harness's HTTP clients (ring provider, explicit trust roots).

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::Result;

/// Installs ring as the process-wide rustls provider (kube's client needs a default one).
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing it is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A rustls client configuration that trusts only the CA certificates in `ca_pem`.
pub fn client_config(ca_pem: &str) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(|e| format!("parsing CA PEM: {e}"))?)?;
    }
    if roots.is_empty() {
        return Err("CA PEM holds no certificate".into());
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// An HTTPS client trusting only `ca_pem`, never using a proxy.
pub fn https_client(ca_pem: &str) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(client_config(ca_pem)?)
        .no_proxy()
        .timeout(std::time::Duration::from_secs(10))
        .build()?)
}

/// A plain-HTTP client (for the local registry), never using a proxy.
pub fn http_client() -> Result<reqwest::Client> {
    ensure_crypto_provider();
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(10))
        .build()?)
}
