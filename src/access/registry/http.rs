//! One HTTP client per registry host (and per token service a registry sends the client to),
//! configured as the node's pull is: the system roots plus the cluster's trust bundle plus the
//! registry's CA, the cluster proxy unless `NO_PROXY` (or Go's loopback rule) skips the host the
//! request goes to, bounded redirects and timeouts; and bounded reads of response bodies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::Limits;
use crate::core::registry::node_config::PullConfig;

/// Builds and keeps the per-host clients.
pub struct Clients {
    config: Arc<PullConfig>,
    system_roots: Vec<CertificateDer<'static>>,
    /// Its timeouts and redirects bound every client.
    limits: Limits,
    by_host: Mutex<HashMap<String, reqwest::Client>>,
}

impl Clients {
    pub fn new(config: Arc<PullConfig>, limits: Limits) -> Self {
        let native = rustls_native_certs::load_native_certs();
        if !native.errors.is_empty() {
            tracing::debug!(
                errors = native.errors.len(),
                "some system trust roots could not be read"
            );
        }
        Clients {
            config,
            system_roots: native.certs,
            limits,
            by_host: Mutex::new(HashMap::new()),
        }
    }

    /// The client for `host` (`host[:port]`), built on first use.
    pub fn for_host(&self, host: &str) -> Result<reqwest::Client, String> {
        self.for_request(host, host)
    }

    /// The client for a request to `target` made on behalf of registry `registry`: the
    /// registry's trust (containers/image uses the registry's `certs.d` for its token requests
    /// too), and the proxy as `target` decides it (Go's proxy function runs per request URL,
    /// so a token service on a `NO_PROXY` or loopback host is reached directly).
    pub fn for_request(&self, registry: &str, target: &str) -> Result<reqwest::Client, String> {
        let (registry, target) = (registry.to_ascii_lowercase(), target.to_ascii_lowercase());
        let key = format!("{registry} {target}");
        if let Ok(map) = self.by_host.lock()
            && let Some(c) = map.get(&key)
        {
            return Ok(c.clone());
        }
        let client = self.build(&registry, &target)?;
        if let Ok(mut map) = self.by_host.lock() {
            map.insert(key, client.clone());
        }
        Ok(client)
    }

    fn build(&self, host: &str, target: &str) -> Result<reqwest::Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(self.system_roots.iter().cloned());
        let mut extra = 0;
        for (what, pem) in [
            (
                "the cluster's trust bundle",
                self.config.trust.everywhere.as_deref(),
            ),
            ("the host's CA", self.config.trust.for_host(host)),
        ] {
            let Some(pem) = pem else { continue };
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| format!("{what} for {host} is not PEM: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("{what} for {host} holds an unusable certificate: {e}"))?;
                extra += 1;
            }
        }
        tracing::debug!(
            host,
            system_roots = added,
            extra_roots = extra,
            "registry client"
        );
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .https_only(true)
            .connect_timeout(self.limits.connect_timeout)
            .timeout(self.limits.request_timeout)
            .redirect(reqwest::redirect::Policy::limited(self.limits.redirects))
            .user_agent(concat!("mosc-guard/", env!("CARGO_PKG_VERSION")));
        builder = match self.config.proxy.proxy_for(target) {
            Some(url) => builder.proxy(
                reqwest::Proxy::all(url)
                    .map_err(|_| "the cluster proxy's httpsProxy is not a URL".to_string())?,
            ),
            None => builder.no_proxy(),
        };
        builder
            .build()
            .map_err(|e| format!("building the HTTP client for {target}: {}", chain(&e)))
    }
}

/// Reads at most `limit` bytes of `resp`'s body; `Ok(None)` when it is longer.
pub async fn read_bounded(
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// An error and its causes on one line (`error sending request: ...: connection refused`),
/// since the top-level error alone rarely says what failed.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut words = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !words.contains(&text) {
            words.push_str(": ");
            words.push_str(&text);
        }
        source = s.source();
    }
    words
}

/// Removes every secret the checker holds from words before they leave it.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<Mutex<Vec<String>>>,
}

impl Redactor {
    /// Remembers `secret` (ignored when shorter than 4 characters: it would mangle words).
    pub fn remember(&self, secret: &str) {
        if secret.len() < 4 {
            return;
        }
        if let Ok(mut s) = self.secrets.lock()
            && !s.iter().any(|k| k == secret)
        {
            s.push(secret.to_string());
        }
    }

    /// `text` with every remembered secret, and any URL's `user:password@`, replaced.
    pub fn clean(&self, text: &str) -> String {
        let mut out = text.to_string();
        if let Ok(secrets) = self.secrets.lock() {
            for s in secrets.iter() {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        strip_userinfo(&out)
    }
}

/// `scheme://user:pass@host` becomes `scheme://<redacted>@host`.
fn strip_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (before, after) = rest.split_at(i + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("<redacted>");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
