//! Taking the node down to nothing, after a run and before one (when an earlier run was killed
//! and left its pieces behind): the processes still using the node's roots (containerd's shims
//! outlive it), every process in the `/kubepods` cgroups and the cgroups themselves, the mounts
//! under the node's roots (pod volumes, overlay snapshots, network namespaces), the roots, the
//! pods' bridge, the kubelet's device-plugin socket (a fixed path), and the `KUBE-*` iptables
//! chains of the kubelet and kube-proxy (the kubelet's `KUBE-FIREWALL` drops traffic to 127/8
//! from other source addresses). Only what is the node's own is touched: podman's bridge,
//! chains and cgroups are left alone.
//!
//! The kubelet does not stop its pods when it stops: [`super::Node`] deletes them through the
//! API first, so the kubelet tears down their sandboxes itself; this is the backstop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::layout::{BRIDGE, Layout};

/// The cgroup that the kubelet (cgroupfs driver, `cgroupsPerQOS`) puts every pod under, in
/// each cgroup v1 hierarchy (and in the unified one, if the machine has one).
const KUBEPODS: &str = "kubepods";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Removes whatever a node left behind; `keep_logs` keeps the logs directory (after a run, so
/// its logs can be read). Best effort: each step that fails is reported in the returned notes
/// and the next one still runs.
pub fn clean(layout: &Layout, keep_logs: bool) -> Vec<String> {
    let mut notes = Vec::new();
    kill_processes_using(layout, &mut notes);
    kill_pods_and_remove_cgroups(&mut notes);
    unmount_under(layout, &mut notes);
    remove_roots(layout, keep_logs, &mut notes);
    remove_device_plugin_dir(&mut notes);
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        run(&mut notes, "ip", &["link", "delete", BRIDGE]);
    }
    for iptables in ["iptables", "ip6tables"] {
        remove_kube_chains(iptables, &mut notes);
    }
    notes
}

/// SIGKILLs every process (but this one) whose command line names one of the node's roots:
/// containerd's shims, and a kubelet or containerd of a run that was killed.
fn kill_processes_using(layout: &Layout, notes: &mut Vec<String>) {
    let roots = [layout.state.clone(), layout.run.clone()];
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        notes.push("cannot read /proc".into());
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if roots
            .iter()
            .any(|r| cmdline.contains(&*r.to_string_lossy()))
        {
            kill(pid);
            notes.push(format!("killed leftover process {pid}: {}", cmdline.trim()));
        }
    }
}

fn kill(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a pid read from /proc; at worst the process is already gone.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Every `kubepods` cgroup directory, deepest first.
fn kubepods_cgroups() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir(CGROUP_ROOT) else {
        return dirs;
    };
    for hierarchy in hierarchies.flatten() {
        let top = hierarchy.path().join(KUBEPODS);
        if top.is_dir() {
            collect_dirs(&top, &mut dirs);
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_owned());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
}

/// SIGKILLs every process in the `kubepods` cgroups (the pods' containers and sandboxes), then
/// removes the cgroups, deepest first, retrying for a few seconds while the processes exit.
fn kill_pods_and_remove_cgroups(notes: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dirs = kubepods_cgroups();
        if dirs.is_empty() {
            return;
        }
        for dir in &dirs {
            if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in procs.lines().filter_map(|p| p.trim().parse::<u32>().ok()) {
                    kill(pid);
                }
            }
        }
        let mut left = Vec::new();
        for dir in &dirs {
            if let Err(e) = std::fs::remove_dir(dir) {
                left.push(format!("{}: {e}", dir.display()));
            }
        }
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            notes.push(format!("cgroups not removed: {}", left.join("; ")));
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Mount points under the node's roots, deepest first (from /proc/self/mountinfo, whose
/// fifth field is the mount point with spaces and such octal-escaped).
fn mounts_under(layout: &Layout) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mount(m)))
        .filter(|m| layout.owns(m))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    mounts.dedup();
    mounts
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape_mount(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(u8::is_ascii_digit));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unmount_under(layout: &Layout, notes: &mut Vec<String>) {
    // A mount can be stacked on another at the same point: go round until none is left.
    for _ in 0..5 {
        let mounts = mounts_under(layout);
        if mounts.is_empty() {
            return;
        }
        for mount in &mounts {
            let Ok(path) = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()) else {
                continue;
            };
            // SAFETY: umount2(2) with a NUL-terminated path; MNT_DETACH never blocks.
            unsafe {
                libc::umount2(path.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
    let left = mounts_under(layout);
    if !left.is_empty() {
        notes.push(format!("mounts left: {left:?}"));
    }
}

fn remove_roots(layout: &Layout, keep_logs: bool, notes: &mut Vec<String>) {
    let logs = layout.logs();
    for root in [&layout.state, &layout.run] {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if keep_logs && path == logs {
                continue;
            }
            let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if let Err(e) = removed {
                notes.push(format!("removing {}: {e}", path.display()));
            }
        }
    }
}

/// The kubelet's device-plugin directory, a fixed path whatever its `--root-dir`.
const DEVICE_PLUGINS: &str = "/var/lib/kubelet/device-plugins";

/// Removes what the kubelet leaves in [`DEVICE_PLUGINS`] (its socket and checkpoint), then the
/// directory and `/var/lib/kubelet` if nothing else is in them (a real kubelet's are left).
fn remove_device_plugin_dir(notes: &mut Vec<String>) {
    let dir = Path::new(DEVICE_PLUGINS);
    for file in ["kubelet.sock", "kubelet_internal_checkpoint"] {
        let path = dir.join(file);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                notes.push(format!("removing {}: {e}", path.display()));
            }
            _ => {}
        }
    }
    // remove_dir refuses a directory that is not empty: anything else there stays.
    let _ = std::fs::remove_dir(dir);
    if let Some(parent) = dir.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// Removes every `KUBE-*` chain of the filter, nat and mangle tables: first the rules of other
/// chains that jump to one, then the chains' own rules, then the chains.
fn remove_kube_chains(iptables: &str, notes: &mut Vec<String>) {
    for table in ["filter", "nat", "mangle"] {
        let Some(rules) = output(iptables, &["-w", "-t", table, "-S"]) else {
            continue;
        };
        let mut chains = Vec::new();
        for line in rules.lines() {
            let words = split_rule(line);
            match words.as_slice() {
                [new, chain] if new == "-N" && chain.starts_with("KUBE-") => {
                    chains.push(chain.clone());
                }
                [append, chain, rest @ ..]
                    if append == "-A"
                        && !chain.starts_with("KUBE-")
                        && rest.iter().any(|w| w.starts_with("KUBE-")) =>
                {
                    let mut args: Vec<&str> = vec!["-w", "-t", table, "-D", chain];
                    args.extend(rest.iter().map(String::as_str));
                    run(notes, iptables, &args);
                }
                _ => {}
            }
        }
        for chain in &chains {
            run(notes, iptables, &["-w", "-t", table, "-F", chain]);
        }
        for chain in &chains {
            run(notes, iptables, &["-w", "-t", table, "-X", chain]);
        }
    }
}

/// Splits one line of `iptables -S` into words, a double-quoted word (a comment) as one.
fn split_rule(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => word.extend(chars.next()),
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run(notes: &mut Vec<String>, program: &str, args: &[&str]) {
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => notes.push(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => notes.push(format!("{program}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iptables_rules_split_into_words_with_quoted_comments_whole() {
        assert_eq!(
            split_rule(
                r#"-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES"#
            ),
            [
                "-A",
                "OUTPUT",
                "-m",
                "comment",
                "--comment",
                "kubernetes service portals",
                "-j",
                "KUBE-SERVICES"
            ]
        );
        assert_eq!(split_rule("-N KUBE-FIREWALL"), ["-N", "KUBE-FIREWALL"]);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mount(r"/var/lib/a\040b"), "/var/lib/a b");
        assert_eq!(unescape_mount("/plain"), "/plain");
    }
}
