//! A throw-away certificate authority issuing server and client certificates as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::Result;

/// A certificate file and its private key file (PEM, PKCS#8 ECDSA P-256).
#[derive(Debug, Clone)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A CA whose certificate and issued certificates live as files in one directory.
pub struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
    ca_path: PathBuf,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Pki {
    /// Creates a new CA in `dir` (created if missing); its certificate is `dir/ca.crt`.
    pub fn new(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name("mosc-guard-e2e-ca", &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let ca_path = dir.join("ca.crt");
        std::fs::write(&ca_path, ca.pem())?;
        Ok(Self {
            dir: dir.to_owned(),
            ca,
            ca_path,
        })
    }

    /// The CA certificate as PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA certificate file.
    pub fn ca_path(&self) -> &Path {
        &self.ca_path
    }

    /// A serving certificate `dir/<name>.crt` (+ `.key`) with CN `name`; each SAN that parses
    /// as an IP address becomes an IP SAN, any other a DNS SAN.
    pub fn server_cert(&self, name: &str, sans: &[&str]) -> Result<CertPair> {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name = self::name(name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(name, params)
    }

    /// A client certificate `dir/<cn>.crt` (+ `.key`) with CN `cn` and O `orgs[0]` (Kubernetes
    /// reads these as user name and group). rcgen keeps one value per attribute type, so at most
    /// one organization is supported.
    pub fn client_cert(&self, cn: &str, orgs: &[&str]) -> Result<CertPair> {
        if orgs.len() > 1 {
            return Err(format!(
                "client_cert({cn}): at most one organization is supported, got {orgs:?}"
            )
            .into());
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(cn, orgs);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(cn, params)
    }

    fn issue(&self, file_stem: &str, mut params: CertificateParams) -> Result<CertPair> {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca)?;
        let stem: String = file_stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let pair = CertPair {
            cert: self.dir.join(format!("{stem}.crt")),
            key: self.dir.join(format!("{stem}.key")),
        };
        std::fs::write(&pair.cert, cert.pem())?;
        std::fs::write(&pair.key, key.serialize_pem())?;
        Ok(pair)
    }
}

fn name(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if let Some(org) = orgs.first() {
        dn.push(DnType::OrganizationName, *org);
    }
    dn.push(DnType::CommonName, cn);
    dn
}
