//! `mosc-guard ARGS` as an admin runs it, in the same clean environment for every test: no
//! `RUST_LOG`, `KUBECONFIG`, `MOSC_GUARD_LOG_FORMAT`, `POD_NAMESPACE` or `POD_NAME` from the
//! test's own environment (each changes what the binary prints or which cluster it talks to).
//!
//! ```ignore
//! let run = BIN.cli().args(["check", "worker"]).kubeconfig(cp.kubeconfig()).run();
//! assert_eq!(run.code, Some(1), "{run:?}");
//! ```
//!
//! A run the test must not block on (the simulator and the test's own tasks share its tokio
//! runtime) goes through [`Cli::run_async`]; one the test watches or interrupts while it runs
//! (Ctrl-C, as an admin would) through [`Cli::start`] and [`Running`].

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

/// The variables a CLI run never inherits.
pub const CLEARED_ENV: [&str; 5] = [
    "RUST_LOG",
    "KUBECONFIG",
    "MOSC_GUARD_LOG_FORMAT",
    "POD_NAMESPACE",
    "POD_NAME",
];

/// One `mosc-guard` command line, not yet run (from [`GuardBin::cli`](crate::guard::GuardBin::cli)).
#[must_use]
pub struct Cli {
    cmd: Command,
    shown: Vec<String>,
}

impl Cli {
    pub(crate) fn new(bin: &Path) -> Self {
        let mut cmd = Command::new(bin);
        for var in CLEARED_ENV {
            cmd.env_remove(var);
        }
        Self {
            cmd,
            shown: Vec::new(),
        }
    }

    /// Appends one argument.
    pub fn arg(self, arg: impl AsRef<OsStr>) -> Self {
        self.args([arg])
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self.shown.push(arg.as_ref().to_string_lossy().into_owned());
            self.cmd.arg(arg);
        }
        self
    }

    /// Appends `--kubeconfig PATH`.
    pub fn kubeconfig(self, path: &Path) -> Self {
        self.args([OsStr::new("--kubeconfig"), path.as_os_str()])
    }

    /// Sets an environment variable for this run (e.g. one of [`CLEARED_ENV`] on purpose).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.cmd.env(key, value);
        self
    }

    /// Runs it to completion; panics if the binary cannot be started or prints anything but
    /// UTF-8.
    pub fn run(mut self) -> CliRun {
        let out = self
            .cmd
            .output()
            .unwrap_or_else(|e| panic!("running mosc-guard {:?}: {e}", self.shown));
        let text = |bytes: Vec<u8>, what: &str| {
            String::from_utf8(bytes)
                .unwrap_or_else(|e| panic!("mosc-guard {:?}: {what} is not UTF-8: {e}", self.shown))
        };
        CliRun {
            code: out.status.code(),
            stdout: text(out.stdout, "stdout"),
            stderr: text(out.stderr, "stderr"),
        }
    }

    /// Runs it to completion with stdout and stderr into one pipe, in the order it wrote them,
    /// as a terminal shows them (what the demo narrates): the exit code and that text.
    pub fn run_merged(mut self) -> (Option<i32>, String) {
        let (mut reader, writer) = std::io::pipe()
            .unwrap_or_else(|e| panic!("a pipe for mosc-guard {:?}: {e}", self.shown));
        let second = writer
            .try_clone()
            .unwrap_or_else(|e| panic!("a pipe for mosc-guard {:?}: {e}", self.shown));
        let mut child = self
            .cmd
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(second)
            .spawn()
            .unwrap_or_else(|e| panic!("starting mosc-guard {:?}: {e}", self.shown));
        // The command holds the pipe's writing ends; drop them so the read ends with the child.
        drop(self.cmd);
        let mut bytes = Vec::new();
        let _ = reader.read_to_end(&mut bytes);
        let status = child
            .wait()
            .unwrap_or_else(|e| panic!("waiting for mosc-guard {:?}: {e}", self.shown));
        (status.code(), String::from_utf8_lossy(&bytes).into_owned())
    }

    /// [`Cli::run`] on a blocking thread, so the runtime's workers (the simulator, the test's
    /// background tasks) keep running while the command does.
    pub async fn run_async(self) -> CliRun {
        tokio::task::spawn_blocking(move || self.run())
            .await
            .expect("the CLI run's thread")
    }

    /// Starts it and returns at once: its stderr can be read while it runs, and it can be
    /// interrupted; [`Running::finish`] waits for the end.
    pub fn start(mut self) -> Running {
        let mut child = self
            .cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting mosc-guard {:?}: {e}", self.shown));
        let mut stdout = child.stdout.take().expect("piped stdout");
        let stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let out = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stdout.read_to_end(&mut bytes);
            bytes
        });
        let err = Arc::new(Mutex::new(String::new()));
        let lines = Arc::clone(&err);
        let err_thread = std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                let mut all = lines.lock().unwrap_or_else(|p| p.into_inner());
                all.push_str(&line);
                all.push('\n');
            }
        });
        Running {
            child: Some(child),
            out: Some(out),
            err,
            err_thread: Some(err_thread),
            shown: self.shown,
        }
    }
}

/// A `mosc-guard` command line running ([`Cli::start`]); killed if dropped unfinished.
pub struct Running {
    child: Option<Child>,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Arc<Mutex<String>>,
    err_thread: Option<JoinHandle<()>>,
    shown: Vec<String>,
}

impl Running {
    /// Its stderr so far (whole lines).
    pub fn stderr(&self) -> String {
        self.err.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits until its stderr holds `text`; errs after `timeout` with what it printed.
    pub async fn wait_for_stderr(&self, text: &str, timeout: Duration) -> crate::Result<()> {
        crate::poll::wait_for(
            || async { Ok(self.stderr().contains(text).then_some(())) },
            timeout,
            &format!("mosc-guard {:?} to print {text:?}", self.shown),
        )
        .await
        .map_err(|e| format!("{e}; it printed:\n{}", self.stderr()).into())
    }

    /// Sends it SIGINT, as Ctrl-C in a terminal does.
    pub fn interrupt(&self) {
        let child = self.child.as_ref().expect("running");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
        // SAFETY: kill only sends a signal, to the child this handle started and has not
        // reaped yet (so the pid is still its).
        let sent = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(sent, 0, "SIGINT to mosc-guard {:?}", self.shown);
    }

    /// Waits for the end (off the runtime's workers) and returns how it ended.
    pub async fn finish(mut self) -> CliRun {
        let mut child = self.child.take().expect("running");
        let out = self.out.take().expect("stdout reader");
        let err_thread = self.err_thread.take().expect("stderr reader");
        let shown = self.shown.clone();
        let (status, stdout) = tokio::task::spawn_blocking(move || {
            let status = child.wait();
            let stdout = out.join().unwrap_or_default();
            let _ = err_thread.join();
            (status, stdout)
        })
        .await
        .expect("the CLI run's thread");
        let status = status.unwrap_or_else(|e| panic!("waiting for mosc-guard {shown:?}: {e}"));
        CliRun {
            code: status.code(),
            stdout: String::from_utf8(stdout)
                .unwrap_or_else(|e| panic!("mosc-guard {shown:?}: stdout is not UTF-8: {e}")),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How a CLI run ended and what it printed.
#[derive(Clone)]
pub struct CliRun {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// Stdout as one JSON document; panics (with stdout) if it is not one.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{}", self.stdout))
    }

    /// Non-empty stderr lines.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

impl std::fmt::Debug for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self
            .code
            .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
        write!(
            f,
            "exit {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        )
    }
}
