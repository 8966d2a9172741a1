//! `mosc-guard certs`: a throwaway CA and a serving certificate for the webhook's Service,
//! for clusters without OpenShift's service-ca operator or cert-manager, and for local runs.
//!
//! [`generate`] is pure (names and a clock in, PEMs out); [`write`] only puts them on disk.
//! The CA's private key is dropped as soon as it has signed the one serving certificate:
//! nothing else should ever be signed by it, so there is no key to leak or to keep safe.
//! The price is that re-running makes a new CA, whose `caBundle` must replace the old one.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use crate::cli::args::CertsArgs;
use crate::cli::output;

/// Secret the manifests mount (`manifests/base/deployment.yaml`).
pub const SECRET_NAME: &str = "mosc-guard-tls";
/// Name of the webhook configurations (validating, and mutating where deployed).
pub const WEBHOOK_CONFIGURATION: &str = "mosc-guard";
/// Upper bound for `--days`; keeps the validity arithmetic far from overflow.
pub const MAX_DAYS: u32 = 36_500;
/// Certificates start this long before "now": the API server's clock may lag this machine's.
const BACKDATE: Duration = Duration::from_secs(60 * 60);
const FILES: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error(
        "invalid {flag} {value:?}: must be a DNS-1123 label (at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit)"
    )]
    InvalidName { flag: &'static str, value: String },
    #[error("invalid --ip {0:?}: not an IPv4 or IPv6 address")]
    InvalidIp(String),
    #[error("invalid --days {0}: must be between 1 and {MAX_DAYS}")]
    InvalidDays(u32),
    #[error("the system clock is before 1970")]
    Clock,
    #[error("generating the certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("refusing to overwrite {}; pass --force to replace", list(.0))]
    Exists(Vec<PathBuf>),
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn list(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

/// Who the serving certificate is for: a Service, checked to be nameable in DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    service: String,
    namespace: String,
    ips: Vec<IpAddr>,
}

impl Subject {
    /// Checks the names the way Kubernetes does, so a typo fails here and not at the first
    /// TLS handshake of the API server.
    pub fn new(service: &str, namespace: &str, ips: &[String]) -> Result<Self, CertsError> {
        for (flag, value) in [("--service", service), ("--namespace", namespace)] {
            if !is_dns1123_label(value) {
                return Err(CertsError::InvalidName {
                    flag,
                    value: value.to_owned(),
                });
            }
        }
        let mut parsed: Vec<IpAddr> = Vec::with_capacity(ips.len());
        for ip in ips {
            let ip: IpAddr = ip
                .trim()
                .parse()
                .map_err(|_| CertsError::InvalidIp(ip.clone()))?;
            if !parsed.contains(&ip) {
                parsed.push(ip);
            }
        }
        Ok(Self {
            service: service.to_owned(),
            namespace: namespace.to_owned(),
            ips: parsed,
        })
    }

    /// Every name a client can use for the Service: the API server uses
    /// `<service>.<namespace>.svc`; pods may use the shorter or longer forms.
    pub fn dns_names(&self) -> Vec<String> {
        let (s, ns) = (&self.service, &self.namespace);
        vec![
            s.clone(),
            format!("{s}.{ns}"),
            format!("{s}.{ns}.svc"),
            format!("{s}.{ns}.svc.cluster.local"),
        ]
    }
}

/// RFC 1123 label as Kubernetes validates Service and Namespace names.
fn is_dns1123_label(s: &str) -> bool {
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// The PEMs `certs` writes. There is deliberately no CA key here (see the module docs).
#[derive(Clone)]
pub struct Bundle {
    /// The CA certificate: what goes into the webhook configuration's `caBundle`.
    pub ca_pem: String,
    /// The serving certificate, signed by the CA.
    pub cert_pem: String,
    /// The serving certificate's key (PKCS#8, ECDSA P-256).
    pub key_pem: String,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle").finish_non_exhaustive()
    }
}

/// Issues a fresh CA and, from it, a serving certificate for `subject`, valid from `now`
/// (backdated an hour) for `days` days.
pub fn generate(subject: &Subject, now: SystemTime, days: u32) -> Result<Bundle, CertsError> {
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(CertsError::InvalidDays(days));
    }
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| CertsError::Clock)?;
    let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
    let (not_before, not_after) = (
        now - BACKDATE,
        now + Duration::from_secs(u64::from(days) * 86_400),
    );

    let mut ca = CertificateParams::default();
    ca.distinguished_name = common_name(&format!(
        "mosc-guard dev CA for {}.{}.svc",
        subject.service, subject.namespace
    ));
    // Path length 0: this CA signs the serving certificate and nothing below it.
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    (ca.not_before, ca.not_after) = (not_before, not_after);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

    let mut leaf = CertificateParams::default();
    leaf.distinguished_name =
        common_name(&format!("{}.{}.svc", subject.service, subject.namespace));
    leaf.subject_alt_names = subject
        .dns_names()
        .into_iter()
        .map(|n| Ok(SanType::DnsName(n.try_into()?)))
        .chain(subject.ips.iter().map(|ip| Ok(SanType::IpAddress(*ip))))
        .collect::<Result<_, rcgen::Error>>()?;
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    (leaf.not_before, leaf.not_after) = (not_before, not_after);
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca)?;

    Ok(Bundle {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn common_name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// `caBundle` is a `[]byte` field, so the API wants the PEM's bytes in standard base64.
pub fn ca_bundle(ca_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

/// Writes ca.crt, tls.crt and tls.key (mode 0600) into `dir`, creating it if missing.
/// Without `force`, nothing is written when any of the three exists, so a pair already
/// in a Secret is never silently replaced.
pub fn write(dir: &Path, bundle: &Bundle, force: bool) -> Result<(), CertsError> {
    let io_err = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| CertsError::Io {
            action,
            path,
            source,
        }
    };
    fs::create_dir_all(dir).map_err(io_err("creating directory", dir))?;
    let paths = FILES.map(|f| dir.join(f));
    if !force {
        let existing: Vec<PathBuf> = paths
            .iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .cloned()
            .collect();
        if !existing.is_empty() {
            return Err(CertsError::Exists(existing));
        }
    }
    let contents = [&bundle.ca_pem, &bundle.cert_pem, &bundle.key_pem];
    let modes = [0o644, 0o644, 0o600];
    for ((path, pem), mode) in paths.iter().zip(contents).zip(modes) {
        // Removed, not truncated: a new file gets `mode` even if the old one had another.
        if force
            && let Err(e) = fs::remove_file(path)
            && e.kind() != io::ErrorKind::NotFound
        {
            return Err(io_err("replacing", path)(e));
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => CertsError::Exists(vec![path.clone()]),
                _ => io_err("creating", path)(e),
            })?;
        file.write_all(pem.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io_err("writing", path))?;
    }
    Ok(())
}

/// Runs `certs`: validates, generates, writes, and returns what to print on stdout
/// (first line `caBundle: <base64>`, so scripts can take it with `sed -n 's/^caBundle: //p'`).
pub fn run(args: &CertsArgs) -> Result<String, CertsError> {
    let subject = Subject::new(&args.service, &args.namespace, &args.ips)?;
    let bundle = generate(&subject, SystemTime::now(), args.days)?;
    write(&args.out, &bundle, args.force)?;
    let b64 = ca_bundle(&bundle.ca_pem);
    let dir = args.out.display();
    let ns = &subject.namespace;
    Ok(format!(
        "caBundle: {b64}\n\
         Wrote {dir}/ca.crt, {dir}/tls.crt and {dir}/tls.key (the CA key is not kept: re-running makes a new CA and caBundle).\n\
         Create the Secret: kubectl -n {ns} create secret tls {SECRET_NAME} --cert={dir}/tls.crt --key={dir}/tls.key\n\
         Set caBundle in the webhook configurations: for c in $(kubectl get validatingwebhookconfiguration,mutatingwebhookconfiguration -o name --field-selector metadata.name={WEBHOOK_CONFIGURATION}); do kubectl patch \"$c\" --type=json -p '[{{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"{b64}\"}}]'; done\n"
    ))
}

/// Runs `certs`; returns the exit status (0 written, 2 error). Files are written before
/// anything is printed, so a failed write prints no caBundle.
pub fn certs(args: CertsArgs) -> ExitCode {
    let written = run(&args).map_err(|e| e.to_string()).and_then(|out| {
        io::stdout()
            .lock()
            .write_all(out.as_bytes())
            .map_err(|e| format!("writing to stdout: {e}"))
    });
    output::status(written.map(|()| ExitCode::SUCCESS))
}

#[cfg(test)]
mod tests;
