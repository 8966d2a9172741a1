//! The real `mosc-guard serve` process on 127.0.0.1: the one way the kit, the tests, the
//! examples and the benchmarks start it ([`GuardBin::serve`] → [`GuardBuilder`] → [`Guard`]).
//!
//! ```ignore
//! const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
//! let guard = BIN.serve(&cp).args(&["--deletion-mode=defer"]).start().await?;
//! ```

use std::borrow::Cow;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use tempfile::TempDir;

mod builder;

pub use builder::GuardBuilder;

use crate::cli::Cli;
use crate::controlplane::ControlPlane;
use crate::pki::Pki;
use crate::process::ChildProcess;
use crate::tls::https_client;
use crate::{Result, probe};

/// Where the `mosc-guard` binary is. The kit cannot name it itself (`CARGO_BIN_EXE_mosc-guard`
/// is set only for the package's own tests): a test passes it in, an example or benchmark
/// finds it with [`GuardBin::from_env`].
#[derive(Clone, Debug)]
pub struct GuardBin(Cow<'static, str>);

impl GuardBin {
    /// The binary at `path`; a test passes `env!("CARGO_BIN_EXE_mosc-guard")`.
    pub const fn at(path: &'static str) -> Self {
        Self(Cow::Borrowed(path))
    }

    /// `$MOSC_GUARD_BIN`, else `mosc-guard` in the profile directory of the running executable
    /// (an example runs from `target/<profile>/examples/`, for which cargo does not build the
    /// binary); else an error saying what to build.
    pub fn from_env() -> Result<Self> {
        if let Some(path) = std::env::var_os("MOSC_GUARD_BIN").filter(|v| !v.is_empty()) {
            let path = path
                .into_string()
                .map_err(|p| format!("MOSC_GUARD_BIN is not UTF-8: {p:?}"))?;
            return Ok(Self(Cow::Owned(path)));
        }
        let exe =
            std::env::current_exe().map_err(|e| format!("locating the running executable: {e}"))?;
        let dir = exe
            .parent()
            .ok_or("the running executable has no directory")?;
        let profile_dir = if dir.ends_with("examples") || dir.ends_with("deps") {
            dir.parent().unwrap_or(dir)
        } else {
            dir
        };
        let path = profile_dir.join("mosc-guard");
        if path.is_file() {
            let path = path
                .into_os_string()
                .into_string()
                .map_err(|p| format!("the target directory is not UTF-8: {p:?}"))?;
            Ok(Self(Cow::Owned(path)))
        } else {
            Err(format!(
                "the mosc-guard binary is not built: {} does not exist; run `cargo build --bin \
                 mosc-guard` first (same profile), or set MOSC_GUARD_BIN to its path",
                path.display()
            )
            .into())
        }
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        Path::new(self.0.as_ref())
    }

    /// `mosc-guard serve` with a serving certificate (SAN 127.0.0.1) from `cp`'s CA, talking
    /// to `cp` with its admin kubeconfig.
    pub fn serve<'a>(&self, cp: &'a ControlPlane) -> GuardBuilder<'a> {
        GuardBuilder::new(self, cp.pki(), Some(cp.kubeconfig().to_owned()))
    }

    /// `mosc-guard serve` without a control plane: a serving certificate from `pki`, no
    /// kubeconfig (the arguments name the source, e.g. `--from-dir`).
    pub fn serve_offline<'a>(&self, pki: &'a Pki) -> GuardBuilder<'a> {
        GuardBuilder::new(self, pki, None)
    }

    /// A run of the command line (`mosc-guard ARGS`), see [`Cli`].
    pub fn cli(&self) -> Cli {
        Cli::new(self.path())
    }
}

/// A running `mosc-guard serve`. Dropping it stops it (SIGTERM, then SIGKILL after the grace
/// period) and removes its directory.
pub struct Guard {
    process: Mutex<ChildProcess>,
    port: u16,
    ca_pem: String,
    http: reqwest::Client,
    _dir: TempDir,
}

impl Guard {
    fn process(&self) -> MutexGuard<'_, ChildProcess> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its process id (0 once stopped): a test shows recovery without a restart by the same id.
    pub fn pid(&self) -> u32 {
        self.process().pid()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `https://127.0.0.1:PORT/validate`, the admission endpoint.
    pub fn validate_url(&self) -> String {
        format!("{}/validate", self.base_url())
    }

    /// A clientConfig calling `path` on it, trusting its CA.
    pub fn client_config(&self, path: &str) -> WebhookClientConfig {
        client_config(&self.base_url(), path, &self.ca_pem)
    }

    /// PEM of the CA that signed its serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// An HTTPS client trusting its serving certificate (one connection pool).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A new HTTPS client trusting its serving certificate (so requests go over new
    /// connections).
    pub fn fresh_client(&self) -> Result<reqwest::Client> {
        https_client(&self.ca_pem)
    }

    /// GET `path`: status and body, or `None` if nothing answered.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        probe::get(&self.http, &format!("{}{path}", self.base_url())).await
    }

    /// The status GET `path` answers, or `None` if nothing answered.
    pub async fn status(&self, path: &str) -> Option<u16> {
        self.get(path).await.map(|(status, _)| status)
    }

    /// Its `/readyz`: status and body (`None` if it did not answer).
    pub async fn readyz(&self) -> Option<(u16, String)> {
        self.get("/readyz").await
    }

    /// Its `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        match self.get("/metrics").await {
            Some((200, text)) => Ok(text),
            Some((status, text)) => Err(format!("/metrics {status}: {text}").into()),
            None => Err("/metrics did not answer".into()),
        }
    }

    /// The value of one series of its `/metrics` (`name{labels}` exactly as exposed).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        probe::metric(&self.metrics().await.ok()?, series)
    }

    /// Waits until the counter `series` of its `/metrics` (`name{labels}` exactly as exposed; a
    /// series not exposed yet counts as 0) exceeds `above`; returns its value. The positive sign
    /// a test waits for before asserting that something did *not* change: the guard has
    /// handled the request or event, so a sleep is not standing in for it.
    pub async fn wait_counter_above(
        &self,
        series: &str,
        above: f64,
        timeout: Duration,
    ) -> Result<f64> {
        let what = format!("{series} above {above}");
        self.poll(&what, timeout, || async {
            let text = self.metrics().await.map_err(|e| e.to_string())?;
            let value = probe::metric(&text, series).unwrap_or(0.0);
            if value > above {
                Ok(value)
            } else {
                Err(format!("{series} {value}"))
            }
        })
        .await
    }

    /// The value of the counter `series` now (0 if not exposed yet): the baseline of
    /// [`Guard::wait_counter_above`].
    pub async fn counter(&self, series: &str) -> Result<f64> {
        Ok(probe::metric(&self.metrics().await?, series).unwrap_or(0.0))
    }

    /// Waits until its log has a line containing every one of `parts`; returns that line. For
    /// a positive sign only the log gives (a debug line, with `RUST_LOG` set through
    /// [`GuardBuilder::env`]).
    pub async fn wait_log_line(&self, parts: &[&str], timeout: Duration) -> Result<String> {
        let what = format!("a log line with {parts:?}");
        self.poll(&what, timeout, || async {
            self.log()
                .lines()
                .find(|l| parts.iter().all(|p| l.contains(p)))
                .map(str::to_owned)
                .ok_or_else(|| "not logged yet".to_string())
        })
        .await
    }

    /// Waits until GET `path` answers `status`; returns the body. Errs at once if the process
    /// exits, and after `timeout` with the last answer and the log tail.
    pub async fn wait_status(&self, path: &str, status: u16, timeout: Duration) -> Result<String> {
        let what = format!("GET {path} answering {status}");
        self.poll(&what, timeout, || async {
            match self.get(path).await {
                Some((s, body)) if s == status => Ok(body),
                got => Err(format!("{got:?}")),
            }
        })
        .await
    }

    /// Waits until GET `url` answers 2xx ([`probe::ready`]), as [`Guard::wait_status`] does.
    async fn wait_ready(&self, url: &str, timeout: Duration) -> Result<()> {
        self.poll("GET /readyz answering 2xx", timeout, || async {
            probe::ready(&self.http, url)
                .await
                .map_err(|e| e.to_string())
        })
        .await
    }

    /// Runs `check` every 100 ms until it succeeds; errs at once if the process exits, and
    /// after `timeout` with `what`, the last error and the log tail.
    async fn poll<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, String>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            let last = match check().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "mosc-guard: no {what} within {timeout:?} (last: {last}); last lines of {}:\n{}",
                    self.log_path().display(),
                    self.log_tail(40)
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Posts `review` to its /validate: (allowed, the refusal message).
    pub async fn post_review(&self, review: &serde_json::Value) -> Result<(bool, String)> {
        let resp: serde_json::Value = self
            .http
            .post(self.validate_url())
            .json(review)
            .timeout(Duration::from_secs(15))
            .send()
            .await?
            .json()
            .await?;
        let allowed = resp["response"]["allowed"].as_bool().ok_or("no verdict")?;
        let message = resp["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok((allowed, message))
    }

    /// Its log file (stdout and stderr).
    pub fn log_path(&self) -> PathBuf {
        self.process().log_path().to_owned()
    }

    /// The whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process().log_tail(lines)
    }

    /// Errs (with the log tail) if the process has exited.
    pub fn check_running(&self) -> Result<()> {
        self.process().check_running()
    }

    /// Whether the process is still running.
    pub fn running(&self) -> bool {
        self.check_running().is_ok()
    }

    /// How the process ended, once it has (`None` while it runs or once stopped).
    pub fn exit_status(&self) -> Option<std::process::ExitStatus> {
        self.process().try_wait()
    }

    /// Waits until the process has exited; errs after `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.running() {
            if Instant::now() >= deadline {
                return Err(format!("still running after {timeout:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Sends SIGTERM (as kubelet does when the pod is deleted) and returns at once.
    pub fn sigterm(&self) {
        self.process().sigterm();
    }

    /// Kills it with SIGKILL, as a crash or a lost node would (no graceful shutdown).
    pub fn kill(&self) {
        self.process().kill();
    }

    /// Stops it now: SIGTERM, then SIGKILL after the grace period (also done on Drop).
    pub fn stop(&self) {
        self.process().stop();
    }
}

/// A clientConfig calling `url_base` + `path`, trusting `ca_pem`.
pub fn client_config(url_base: &str, path: &str, ca_pem: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        url: Some(format!("{url_base}{path}")),
        ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
        service: None,
    }
}
