//! [`GuardBuilder`]: how one `mosc-guard serve` is started (arguments, ports, certificates,
//! environment, stop grace, readiness).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Guard, GuardBin};
use crate::net::{free_port, retry_start};
use crate::pki::Pki;
use crate::process::ChildProcess;
use crate::tls::https_client;
use crate::{Result, init_tracing, temp_dir};

/// How to start one `mosc-guard serve`. By default: a free port, `--shutdown-delay=0` (stopping
/// a guard should not cost the 10 s drain) unless the arguments set one, stopped on Drop with
/// SIGTERM and SIGKILL 5 s (plus any shutdown delay asked for) later, ready once `GET /readyz`
/// answers 200 within 30 s.
#[must_use]
pub struct GuardBuilder<'a> {
    bin: PathBuf,
    pki: &'a Pki,
    kubeconfig: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    port: Option<u16>,
    metrics_port: Option<u16>,
    tls_files: Option<(PathBuf, PathBuf)>,
    keep_shutdown_delay: bool,
    stop_grace: Option<Duration>,
    ready_timeout: Duration,
}

impl<'a> GuardBuilder<'a> {
    pub(super) fn new(bin: &GuardBin, pki: &'a Pki, kubeconfig: Option<PathBuf>) -> Self {
        Self {
            bin: bin.path().to_owned(),
            pki,
            kubeconfig,
            args: Vec::new(),
            env: Vec::new(),
            port: None,
            metrics_port: None,
            tls_files: None,
            keep_shutdown_delay: false,
            stop_grace: None,
            ready_timeout: Duration::from_secs(30),
        }
    }

    /// Extra `serve` arguments (e.g. `["--policy", "in-use"]`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Talks to the API server with `kubeconfig` instead of the admin's (e.g. a
    /// ServiceAccount token's, to exercise the product's RBAC).
    pub fn kubeconfig(mut self, kubeconfig: &Path) -> Self {
        self.kubeconfig = Some(kubeconfig.to_owned());
        self
    }

    /// Sets an environment variable of the process (it inherits the test's otherwise, less
    /// `KUBECONFIG`, `MOSC_GUARD_LOG_FORMAT`, `POD_NAMESPACE` and `POD_NAME`).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Listens on `port`, chosen in advance (e.g. to name `127.0.0.1:PORT` in the API server's
    /// admission configuration); no retry if it is taken meanwhile.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Serves probes and metrics on `port` (`--metrics-listen`), where readiness is polled
    /// (the main port may require a client certificate the kit does not have).
    pub fn metrics_port(mut self, port: u16) -> Self {
        self.metrics_port = Some(port);
        self
    }

    /// Serves the certificate and key in these files (e.g. a Secret volume a test rotates)
    /// instead of one issued for the process; they must be signed by the builder's CA.
    pub fn tls_files(mut self, cert: &Path, key: &Path) -> Self {
        self.tls_files = Some((cert.to_owned(), key.to_owned()));
        self
    }

    /// Leaves `--shutdown-delay` at the binary's default (10 s) instead of 0.
    pub fn keep_shutdown_delay(mut self) -> Self {
        self.keep_shutdown_delay = true;
        self
    }

    /// How long a stop waits between SIGTERM and SIGKILL.
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = Some(grace);
        self
    }

    /// How long [`GuardBuilder::start`] waits for readiness.
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Starts the process and returns at once (a test that watches readiness itself).
    pub fn spawn(&self) -> Result<Guard> {
        let port = match self.port {
            Some(port) => port,
            None => free_port()?,
        };
        self.spawn_on(port)
    }

    /// Starts the process and waits until `GET /readyz` answers 200 (on the metrics port if
    /// one is set); starts again on another port if the one picked was taken meanwhile.
    pub async fn start(&self) -> Result<Guard> {
        let started = Instant::now();
        let guard = match self.port {
            Some(port) => self.start_on(port).await?,
            None => retry_start("mosc-guard", || self.start_on_free_port()).await?,
        };
        tracing::info!(
            "mosc-guard ready at {} in {:.2?}",
            guard.base_url(),
            started.elapsed()
        );
        Ok(guard)
    }

    async fn start_on_free_port(&self) -> Result<Guard> {
        self.start_on(free_port()?).await
    }

    async fn start_on(&self, port: u16) -> Result<Guard> {
        let guard = self.spawn_on(port)?;
        let url = match self.metrics_port {
            Some(metrics_port) => format!("https://127.0.0.1:{metrics_port}/readyz"),
            None => format!("{}/readyz", guard.base_url()),
        };
        guard.wait_ready(&url, self.ready_timeout).await?;
        Ok(guard)
    }

    fn spawn_on(&self, port: u16) -> Result<Guard> {
        init_tracing();
        let dir = temp_dir("mosc-guard-guard-")?;
        let (cert, key) = match &self.tls_files {
            Some(files) => files.clone(),
            None => {
                let pair = self
                    .pki
                    .server_cert(&format!("mosc-guard-{port}"), &["127.0.0.1"])?;
                (pair.cert, pair.key)
            }
        };
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .args(&self.args);
        for var in [
            "KUBECONFIG",
            "MOSC_GUARD_LOG_FORMAT",
            "POD_NAMESPACE",
            "POD_NAME",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(kubeconfig) = &self.kubeconfig {
            cmd.arg("--kubeconfig").arg(kubeconfig);
        }
        if let Some(metrics_port) = self.metrics_port {
            cmd.arg("--metrics-listen")
                .arg(format!("127.0.0.1:{metrics_port}"));
        }
        let delay = self.shutdown_delay();
        if delay.is_none() && !self.keep_shutdown_delay {
            cmd.arg("--shutdown-delay=0");
        }
        let grace = self
            .stop_grace
            .unwrap_or_else(|| Duration::from_secs(5 + delay.unwrap_or(0)));
        let process = ChildProcess::spawn("mosc-guard", cmd, &dir.path().join("mosc-guard.log"))?
            .with_stop_grace(grace);
        let ca_pem = self.pki.ca_pem();
        Ok(Guard {
            process: Mutex::new(process),
            port,
            http: https_client(&ca_pem)?,
            ca_pem,
            _dir: dir,
        })
    }

    /// The `--shutdown-delay` the arguments set, in seconds.
    fn shutdown_delay(&self) -> Option<u64> {
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            if let Some(value) = arg.strip_prefix("--shutdown-delay=") {
                return Some(value.parse().unwrap_or(0));
            }
            if arg == "--shutdown-delay" {
                return Some(args.next().and_then(|v| v.parse().ok()).unwrap_or(0));
            }
        }
        None
    }
}
