//! Child processes that log to a file, die with the test process and stop on Drop.

use std::fs::File;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use crate::Result;

/// A running child process. Its stdout and stderr go to one log file. Dropping it stops the
/// process: SIGTERM, then SIGKILL once the stop grace period (default: none) has passed.
///
/// As a backstop the child gets `PR_SET_PDEATHSIG = SIGKILL`, so it also dies if the test process
/// dies without running destructors. (Linux ties this to the thread that spawned the child, so
/// every child is spawned by one thread that lives as long as the process: a control plane
/// outlives the test that started it when another test reuses it.)
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
    stop_grace: Duration,
}

impl ChildProcess {
    /// Spawns `cmd` as `name` with stdin closed and stdout/stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Self> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("opening log file {} for {name}: {e}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: the closure only calls async-signal-safe functions (prctl, getppid).
        let parent = std::process::id() as libc::pid_t;
        unsafe {
            cmd.pre_exec(move || die_with_parent(parent));
        }
        let program = cmd.get_program().to_owned();
        let child =
            spawn_lasting(cmd).map_err(|e| format!("spawning {name} ({program:?}): {e}"))?;
        tracing::debug!("started {name} (pid {}), log {}", child.id(), log.display());
        Ok(Self {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_owned(),
            stop_grace: Duration::ZERO,
        })
    }

    /// Gives the process `grace` between SIGTERM and SIGKILL when it is stopped.
    pub fn with_stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// The process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The log file holding the process's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the log (or a note saying why it cannot be read).
    pub fn log_tail(&self, lines: usize) -> String {
        tail_of_file(&self.log, lines)
    }

    /// Errs (with the log tail) if the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Err(format!("{} was stopped", self.name).into());
        };
        match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(format!(
                "{} exited early ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                self.log_tail(40)
            )
            .into()),
        }
    }

    /// Polls `probe` every `interval` until it returns `Ok(())`, failing fast if the process
    /// exits and with the last probe error and the log tail after `timeout`.
    pub async fn wait_ready<F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        interval: Duration,
        mut probe: F,
    ) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            let last = match probe().await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not become ready ({what}) within {timeout:?}: last probe error: {last}; \
                     last lines of {}:\n{}",
                    self.name,
                    self.log.display(),
                    self.log_tail(40)
                )
                .into());
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Waits (up to a minute) until the process's log holds one of `lines`, and returns it: how a
    /// server without a probe says it is ready (or that it went on without being so).
    pub async fn wait_log_line(
        &mut self,
        what: &str,
        lines: &[&'static str],
    ) -> Result<&'static str> {
        let log = self.log.clone();
        let mut seen = None;
        self.wait_ready(
            what,
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                seen = lines.iter().copied().find(|line| text.contains(line));
                let found = match seen {
                    Some(_) => Ok(()),
                    None => Err(format!("none of {lines:?} in its log yet").into()),
                };
                std::future::ready(found)
            },
        )
        .await?;
        seen.ok_or_else(|| format!("{what}: no line seen").into())
    }

    /// Sends SIGTERM and returns at once (nothing if it was stopped).
    pub fn sigterm(&self) {
        if let Some(pid) = self
            .child
            .as_ref()
            .and_then(|c| libc::pid_t::try_from(c.id()).ok())
        {
            // SAFETY: kill(2) on our own child, not yet reaped (the handle owns it).
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }

    /// How the process ended, if it has (`None` while it runs, or once stopped).
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Kills the process with SIGKILL at once (a crash: no clean-up runs) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process (SIGTERM, grace period, SIGKILL) and reaps it. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        if !self.stop_grace.is_zero() {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: plain kill(2) on our own child's pid, which is not yet reaped.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + self.stop_grace;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            tracing::warn!(
                "{} did not stop within {:?}; killing it",
                self.name,
                self.stop_grace
            );
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spawns `cmd` from the process's spawning thread, started on first use and never ended, so
/// `PR_SET_PDEATHSIG` fires when the process dies, not when the calling thread ends.
fn spawn_lasting(cmd: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in incoming {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| panic!("starting the spawning thread: {e}"));
        requests
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .send((cmd, reply))
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))?
}

/// Runs in the forked child before exec: die with SIGKILL when the parent goes away.
fn die_with_parent(parent: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid are async-signal-safe and touch no memory of ours.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The parent may have died between fork and prctl.
        if libc::getppid() != parent {
            return Err(std::io::Error::other("parent exited before exec"));
        }
    }
    Ok(())
}

/// The last `lines` lines of the file at `path`, reading at most its last 64 KiB.
pub fn tail_of_file(path: &Path, lines: usize) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        let all: Vec<&str> = text.lines().collect();
        Ok(all[all.len().saturating_sub(lines)..].join("\n"))
    };
    read().unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()))
}

/// Runs `cmd` to completion on tokio's blocking pool with stdin closed (as the kit runs
/// kubectl): its exit status and output.
pub async fn output(mut cmd: Command) -> std::io::Result<std::process::Output> {
    cmd.stdin(Stdio::null());
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .map_err(std::io::Error::other)?
}

/// A finished command's exit code, stdout and stderr, for an assertion's message.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_for_log_lines_says_which_came() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo starting; sleep 0.3; echo 'went on without it'; sleep 30",
        ]);
        let mut process = ChildProcess::spawn("sh", cmd, &dir.path().join("log"))?;
        let seen = process
            .wait_log_line("ready", &["ready now", "went on without it"])
            .await?;
        assert_eq!(seen, "went on without it");
        Ok(())
    }
}
