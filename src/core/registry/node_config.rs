//! What a node pulls its image with, as the ControllerConfig `machine-config-controller` gives it
//! (MCO's daemon writes these files from it):
//!
//! - `spec.internalRegistryPullSecret`: the auth file rpm-ostree pulls with ([`super::auth`]);
//!   never the MachineOSConfig's push secret, which nodes do not have.
//! - `spec.imageRegistryBundleData` and `spec.imageRegistryBundleUserData`: per-host CAs
//!   (`certs.d/<file>`, `..` for `:`); `spec.additionalTrustBundle` is trusted for every host.
//! - `spec.proxy`: which hosts skip it is Go's `NO_PROXY` rule ([`ProxySettings::proxy_for`]).
//!
//! Byte fields arrive base64-encoded, as Kubernetes writes Go's `[]byte`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine as _;
use serde::Deserialize;

use super::auth::{AuthError, AuthFile};
use super::sources::MirrorRule;

/// Everything a pull as the node makes it reads: credentials, CAs, proxy, mirrors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullConfig {
    pub auths: AuthFile,
    pub trust: RegistryTrust,
    pub proxy: ProxySettings,
    /// Merged ([`super::sources::merge`]).
    pub mirrors: Vec<MirrorRule>,
}

/// The ControllerConfig's spec fields the pull reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ControllerConfigSpec {
    pub internal_registry_pull_secret: Option<String>,
    pub image_registry_bundle_data: Vec<BundleFile>,
    pub image_registry_bundle_user_data: Vec<BundleFile>,
    pub additional_trust_bundle: Option<String>,
    pub proxy: Option<ProxySettings>,
}

/// One `ImageRegistryBundle`: `{file, data}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct BundleFile {
    pub file: String,
    /// Base64 of the PEM.
    pub data: String,
}

/// The cluster proxy as the ControllerConfig carries it (`configv1.ProxyStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxySettings {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<String>,
}

/// The CAs a node trusts for registries: per host, and for every host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryTrust {
    /// `host[:port]` -> PEM.
    pub per_host: BTreeMap<String, String>,
    /// PEM trusted for every host besides the system roots.
    pub everywhere: Option<String>,
}

impl RegistryTrust {
    /// The PEM for `host` (`host[:port]` exactly as the image names it), if any.
    pub fn for_host(&self, host: &str) -> Option<&str> {
        self.per_host
            .get(&host.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// The host a `certs.d` directory name is for: `..` stands for `:`.
pub fn bundle_host(file: &str) -> String {
    file.trim().replace("..", ":").to_ascii_lowercase()
}

/// Why a ControllerConfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NodeConfigError {
    #[error("{field} is not base64")]
    NotBase64 { field: String },
    #[error("spec.internalRegistryPullSecret: {0}")]
    PullSecret(AuthError),
}

fn decode(field: &str, data: &str) -> Result<Vec<u8>, NodeConfigError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| NodeConfigError::NotBase64 {
            field: field.to_string(),
        })
}

impl ControllerConfigSpec {
    /// The CAs, user bundles after the service CA's (a later file for the same host replaces
    /// an earlier one, as the daemon's writes do).
    pub fn trust(&self) -> Result<RegistryTrust, NodeConfigError> {
        let mut trust = RegistryTrust::default();
        for (field, files) in [
            (
                "spec.imageRegistryBundleData",
                &self.image_registry_bundle_data,
            ),
            (
                "spec.imageRegistryBundleUserData",
                &self.image_registry_bundle_user_data,
            ),
        ] {
            for f in files {
                if f.file.trim().is_empty() {
                    continue;
                }
                let pem = decode(&format!("{field}[{}]", f.file), &f.data)?;
                let pem = String::from_utf8_lossy(&pem).into_owned();
                trust.per_host.insert(bundle_host(&f.file), pem);
            }
        }
        if let Some(bundle) = self.additional_trust_bundle.as_deref()
            && !bundle.trim().is_empty()
        {
            let pem = decode("spec.additionalTrustBundle", bundle)?;
            trust.everywhere = Some(String::from_utf8_lossy(&pem).into_owned());
        }
        Ok(trust)
    }

    /// The node's pull credentials (empty when the field is absent).
    pub fn pull_secret(&self) -> Result<AuthFile, NodeConfigError> {
        match self.internal_registry_pull_secret.as_deref() {
            None => Ok(AuthFile::default()),
            Some(s) if s.trim().is_empty() => Ok(AuthFile::default()),
            Some(s) => AuthFile::parse(&decode("spec.internalRegistryPullSecret", s)?)
                .map_err(NodeConfigError::PullSecret),
        }
    }
}

impl ProxySettings {
    /// The proxy an HTTPS request to `host` (`host[:port]`) goes through, as Go's
    /// `httpproxy.Config.ProxyFunc` decides: none for localhost and loopback addresses, none when
    /// `noProxy` matches (`*`; an IP or CIDR; a domain, which also matches its subdomains; a
    /// leading `.`, subdomains only; an entry with a port, that port only), else `httpsProxy`.
    pub fn proxy_for(&self, host: &str) -> Option<&str> {
        let proxy = self
            .https_proxy
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())?;
        (!bypasses(host, self.no_proxy.as_deref().unwrap_or(""))).then_some(proxy)
    }
}

/// Splits `host[:port]` (IPv6 in brackets, or bare).
fn split_host(host: &str) -> (String, Option<String>) {
    let host = host.trim().to_ascii_lowercase();
    if let Some(rest) = host.strip_prefix('[')
        && let Some((ip, after)) = rest.split_once(']')
    {
        return (ip.to_string(), after.strip_prefix(':').map(str::to_string));
    }
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p.to_string())),
        _ => (host, None),
    }
}

fn bypasses(host: &str, no_proxy: &str) -> bool {
    let (name, port) = split_host(host);
    let port = port.unwrap_or_else(|| "443".to_string());
    let ip: Option<IpAddr> = name.parse().ok();
    if name == "localhost" || ip.is_some_and(|ip| ip.is_loopback()) {
        return true;
    }
    for entry in no_proxy.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if entry == "*" {
            return true;
        }
        if let Some((net, bits)) = entry.split_once('/') {
            if let (Ok(net), Ok(bits), Some(ip)) = (net.parse::<IpAddr>(), bits.parse::<u8>(), ip)
                && in_cidr(ip, net, bits)
            {
                return true;
            }
            continue;
        }
        let (entry_name, entry_port) = split_host(entry);
        if entry_port.is_some_and(|p| p != port) {
            continue;
        }
        let domain = entry_name.strip_prefix('*').unwrap_or(&entry_name);
        let matched = match (entry_name.parse::<IpAddr>(), domain.strip_prefix('.')) {
            (Ok(entry_ip), _) => ip == Some(entry_ip),
            (Err(_), Some(suffix)) => name.ends_with(&format!(".{suffix}")),
            (Err(_), None) => name == domain || name.ends_with(&format!(".{domain}")),
        };
        if matched {
            return true;
        }
    }
    false
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        // A shift by the whole width (a /0) leaves no bits: the mask is 0.
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
