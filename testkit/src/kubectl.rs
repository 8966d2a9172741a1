//! Running `/usr/bin/kubectl` against the harness's control plane.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use crate::Result;

/// What a kubectl run printed and how it ended.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl KubectlOutput {
    /// Whether kubectl exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// Runs `/usr/bin/kubectl --kubeconfig <kubeconfig> --cache-dir <cache_dir> <args>` (blocking
/// work on tokio's blocking pool), with `stdin` piped in if given, and logs command and output.
pub async fn run<I, S>(
    kubeconfig: &Path,
    cache_dir: &Path,
    args: I,
    stdin: Option<&str>,
) -> Result<KubectlOutput>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new("/usr/bin/kubectl");
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache_dir)
        .args(&args)
        .env_remove("KUBECONFIG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let input = stdin.map(str::to_owned);
    let output = tokio::task::spawn_blocking(move || -> std::io::Result<std::process::Output> {
        let mut child = cmd.spawn()?;
        if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
            pipe.write_all(input.as_bytes())?;
        }
        child.wait_with_output()
    })
    .await?
    .map_err(|e| format!("running kubectl {shown}: {e}"))?;
    let out = KubectlOutput {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    let stderr = match out.stderr.trim_end() {
        "" => String::new(),
        text => format!("\n{text}"),
    };
    tracing::info!(
        "$ kubectl {shown}  => {}\n{}{stderr}",
        out.status,
        out.stdout.trim_end()
    );
    Ok(out)
}
