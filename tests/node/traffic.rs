//! What the pods are sent while an admin operates on them: a client that keeps asking the API
//! server for server-side dry-run deletions (they reach the webhook through its Service exactly
//! as real ones do, `sideEffects: NoneOnDryRun`, and leave the objects in place: the "delete" and
//! the "re-create" of a guarded object in one request), and a look at the certificate each pod
//! serves on its webhook port.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::task::JoinHandle;

use testkit::scenario::{REFUSED_BY_GUARD, dry_run_delete};

/// How a stream of dry-run deletions went.
#[derive(Debug, Default)]
pub struct Tally {
    /// Refused by the guard with its reason, as they must be.
    pub denied: usize,
    /// Admitted, as they must be.
    pub allowed: usize,
    /// Answered, but the other way round.
    pub wrong: Vec<String>,
    /// Not answered by the guard (the API server could not call it, or timed out).
    pub failed: Vec<String>,
    pub elapsed: Duration,
}

impl Tally {
    pub fn summary(&self) -> String {
        format!(
            "{} dry-run deletions in {:.1?}: {} denied and {} allowed as they must be, {} wrong, {} failed",
            self.denied + self.allowed + self.wrong.len() + self.failed.len(),
            self.elapsed,
            self.denied,
            self.allowed,
            self.wrong.len(),
            self.failed.len()
        )
    }
}

/// A running client; [`Client::stop`] ends it and returns its tally.
pub struct Client {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Tally>,
}

/// Starts a client asking, back to back with 20 ms between, for a dry-run deletion of MOSC
/// `refused` (mid-rollout: the guard must refuse it, saying why) and then of MOSC `admitted`
/// (nothing needs its images: the guard must admit it).
pub fn start(client: kube::Client, refused: &str, admitted: &str) -> Client {
    let stop = Arc::new(AtomicBool::new(false));
    let (refused, admitted) = (refused.to_owned(), admitted.to_owned());
    let task = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move {
            let started = Instant::now();
            let mut tally = Tally::default();
            while !stop.load(Ordering::Relaxed) {
                match dry_run_delete(&client, &refused).await {
                    Err(message) if message.contains(REFUSED_BY_GUARD) => tally.denied += 1,
                    Err(message) => tally.failed.push(format!("{refused}: {message}")),
                    Ok(()) => tally.wrong.push(format!("{refused}: admitted")),
                }
                match dry_run_delete(&client, &admitted).await {
                    Ok(()) => tally.allowed += 1,
                    Err(message) if message.contains(REFUSED_BY_GUARD) => {
                        tally.wrong.push(format!("{admitted}: {message}"));
                    }
                    Err(message) => tally.failed.push(format!("{admitted}: {message}")),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tally.elapsed = started.elapsed();
            tally
        }
    });
    Client { stop, task }
}

impl Client {
    pub async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the client task")
    }
}

/// The DER of the (first) certificate in the PEM file at `path`.
pub fn der_of(path: &Path) -> Vec<u8> {
    CertificateDer::pem_file_iter(path)
        .expect("read certificate")
        .next()
        .expect("one certificate")
        .expect("PEM")
        .as_ref()
        .to_vec()
}

/// The certificate a new TLS connection to the pod at `ip` gets on the webhook port (8443,
/// `--listen`), verified against `ca_pem` for the Service's name as the API server verifies it.
pub async fn served_certificate(ip: IpAddr, ca_pem: &str) -> Option<Vec<u8>> {
    let host = "mosc-guard.mosc-guard.svc";
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(testkit::tls::client_config(ca_pem).ok()?)
        .resolve(host, SocketAddr::new(ip, 8443))
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    let response = client
        .get(format!("https://{host}:8443/healthz"))
        .send()
        .await
        .ok()?;
    let info = response.extensions().get::<reqwest::tls::TlsInfo>()?;
    info.peer_certificate().map(<[u8]>::to_vec)
}
