//! `mosc-guard ARGS` as an admin runs it, in the same clean environment for every test: no
//! `RUST_LOG`, `KUBECONFIG`, `MOSC_GUARD_LOG_FORMAT`, `POD_NAMESPACE` or `POD_NAME` from the
//! test's own environment (each changes what the binary prints or which cluster it talks to).
//!
//! ```ignore
//! let run = BIN.cli().args(["check", "worker"]).kubeconfig(cp.kubeconfig()).run();
//! assert_eq!(run.code, Some(1), "{run:?}");
//! ```

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

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
