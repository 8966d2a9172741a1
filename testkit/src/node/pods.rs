//! A pod as the node sees it: its cgroups (cgroup v1, the kubelet's cgroupfs layout
//! `kubepods[/<qos>]/pod<uid>/<container>`), so a test can read its memory as the kernel
//! accounts it and find its processes to check what they run as.

use std::path::{Path, PathBuf};

use crate::Result;

/// A pod's memory cgroup, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct PodMemory {
    /// `memory.usage_in_bytes` (page cache included).
    pub usage: u64,
    /// `memory.max_usage_in_bytes`: the peak since the pod started.
    pub peak: u64,
    /// `memory.limit_in_bytes`: what the kubelet set from the containers' limits.
    pub limit: u64,
    /// `total_rss` of `memory.stat`: anonymous memory, what the processes themselves hold.
    pub rss: u64,
}

/// The pod's directory in the `controller` hierarchy (`memory`, `pids`, ...).
fn pod_dir(controller: &str, pod_uid: &str) -> Result<PathBuf> {
    let base = Path::new("/sys/fs/cgroup")
        .join(controller)
        .join("kubepods");
    let pod = format!("pod{pod_uid}");
    ["", "burstable", "besteffort"]
        .iter()
        .map(|qos| base.join(qos).join(&pod))
        .find(|d| d.is_dir())
        .ok_or_else(|| {
            format!(
                "no {controller} cgroup for pod {pod_uid} under {}",
                base.display()
            )
            .into()
        })
}

pub(super) fn memory(pod_uid: &str) -> Result<PodMemory> {
    let dir = pod_dir("memory", pod_uid)?;
    let read = |file: &str| -> Result<u64> {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        text.trim()
            .parse()
            .map_err(|e| format!("{}: {text:?}: {e}", path.display()).into())
    };
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let rss = stat
        .lines()
        .find_map(|l| l.strip_prefix("total_rss "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Ok(PodMemory {
        usage: read("memory.usage_in_bytes")?,
        peak: read("memory.max_usage_in_bytes")?,
        limit: read("memory.limit_in_bytes")?,
        rss,
    })
}

pub(super) fn processes(pod_uid: &str) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    collect(&pod_dir("memory", pod_uid)?, &mut pids);
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

fn collect(dir: &Path, pids: &mut Vec<u32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|p| p.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect(&entry.path(), pids);
            }
        }
    }
}
