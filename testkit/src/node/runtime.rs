//! The node's container runtime: Debian's containerd with its CRI plugin, runc, the overlayfs
//! snapshotter and cgroupfs, every path of its own under the node's roots; and the images it
//! runs, imported from archives (nothing can be pulled here): the pause image
//! (`hack/node/pause-image.sh`) and the images a test names, saved from podman's storage where
//! `make image` built them.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::layout::Layout;
use crate::Result;
use crate::process::{ChildProcess, output, output_text};

/// containerd's CRI namespace, where the kubelet's images and containers live.
const CRI_NAMESPACE: &str = "k8s.io";

/// containerd 1.6's configuration (version 2):
/// - `restrict_oom_score_adj`: root here lacks CAP_SYS_RESOURCE, and runc fails every sandbox
///   with "can't get final child's PID from pipe: EOF" when asked to lower `oom_score_adj`
///   (side effect: Guaranteed pods get 0 instead of -997);
/// - `netns_mounts_under_state_dir`, runc's `Root` and the `opt` path keep network namespaces,
///   container state and plugins under the node's roots instead of `/run/netns`,
///   `/run/containerd/runc` and `/opt/containerd`.
fn config(layout: &Layout, pause_image: &str) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"#,
        root = layout.containerd_root().display(),
        state = layout.containerd_state().display(),
        socket = layout.containerd_socket().display(),
        opt = layout.containerd_opt().display(),
        runc = RUNC,
        runc_root = layout.runc_root().display(),
        cni_bin = super::layout::CNI_BIN,
        cni_conf = layout.cni_conf_dir().display(),
    )
}

/// Debian's runc (package runc).
pub const RUNC: &str = "/usr/sbin/runc";
/// Debian's containerd and its client (package containerd).
const CONTAINERD: &str = "/usr/bin/containerd";
const CTR: &str = "/usr/bin/ctr";

/// Writes containerd's configuration, starts it and waits until its API answers.
pub async fn start_containerd(layout: &Layout, pause_image: &str) -> Result<ChildProcess> {
    std::fs::write(layout.containerd_config(), config(layout, pause_image))?;
    let mut cmd = Command::new(CONTAINERD);
    cmd.arg("--config").arg(layout.containerd_config());
    let mut process = ChildProcess::spawn("containerd", cmd, &layout.log("containerd"))?
        .with_stop_grace(Duration::from_secs(10));
    let socket = layout.containerd_socket();
    process
        .wait_ready(
            "ctr version",
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let socket = socket.clone();
                async move {
                    let out = ctr(&socket, &["version"]).await?;
                    if out.status.success() {
                        Ok(())
                    } else {
                        Err(output_text(&out).into())
                    }
                }
            },
        )
        .await?;
    Ok(process)
}

/// Imports the image archive at `archive` (docker-archive or OCI) into the CRI namespace.
pub async fn import(layout: &Layout, archive: &Path) -> Result<()> {
    let archive = archive.to_str().ok_or("image archive path is not UTF-8")?;
    let out = ctr(
        &layout.containerd_socket(),
        &["-n", CRI_NAMESPACE, "images", "import", archive],
    )
    .await?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ctr images import {archive}: {}", output_text(&out)).into())
    }
}

/// Saves `image` from podman's storage (where `make image` and buildah put it) to an archive
/// in `dir` and imports it: the kubelet then finds it present (`imagePullPolicy: IfNotPresent`)
/// and pulls nothing.
pub async fn load_from_podman(layout: &Layout, image: &str, dir: &Path) -> Result<()> {
    let archive = dir.join("image.tar");
    let mut cmd = Command::new("podman");
    cmd.args(["save", "--quiet", "--format", "docker-archive", "-o"])
        .arg(&archive)
        .arg(image);
    let out = output(cmd)
        .await
        .map_err(|e| format!("running podman save {image}: {e}"))?;
    if !out.status.success() {
        return Err(format!("podman save {image}: {}", output_text(&out)).into());
    }
    let imported = import(layout, &archive).await;
    let _ = std::fs::remove_file(&archive);
    imported
}

/// Builds (once, cached) the pause image with `hack/node/pause-image.sh`: its reference and
/// archive.
pub fn pause_image() -> Result<(String, std::path::PathBuf)> {
    let script = crate::repo_root().join("hack/node/pause-image.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), output_text(&out)).into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
            .ok_or_else(|| format!("{} printed no {key}: {stdout:?}", script.display()))
    };
    Ok((value("image")?, value("archive")?.into()))
}

async fn ctr(socket: &Path, args: &[&str]) -> Result<std::process::Output> {
    let mut cmd = Command::new(CTR);
    cmd.arg("--address").arg(socket).args(args);
    output(cmd)
        .await
        .map_err(|e| format!("running {CTR}: {e}").into())
}
