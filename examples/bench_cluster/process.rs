//! What the benchmark reads from `/proc`: a process's CPU and memory, and how busy the machine
//! was with work other than the benchmark's own processes (other builds on a shared host), so
//! that a run states the load its figures were measured under.

use std::collections::HashMap;

/// Clock ticks per second of `/proc`'s CPU times (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// User + system CPU seconds `pid` has used (from /proc/PID/stat).
pub fn cpu_seconds(pid: u32) -> f64 {
    stat_fields(pid).map_or(0.0, |s| s.cpu_ticks as f64 / TICKS)
}

/// VmRSS, VmHWM (peak) and RssFile (the binary's mapped pages, part of VmRSS) of `pid`, in MiB.
pub fn memory_mib(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"), field("RssFile:"))
}

/// The fields of /proc/PID/stat this file uses.
struct Stat {
    parent: u32,
    cpu_ticks: u64,
}

fn stat_fields(pid: u32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at state (field 3).
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let number = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        parent: u32::try_from(number(1)?).ok()?,
        cpu_ticks: number(11)? + number(12)?,
    })
}

/// A point in time for [`Machine::since`]: the machine's CPU ticks, and those of this process
/// and its descendants (the control plane, the guards).
pub struct Machine {
    ticks: Ticks,
    ours: u64,
}

/// What the machine's cores did between two [`Machine`]s, in cores (e.g. 0.1 of 2).
pub struct Busy {
    /// Busy outside this benchmark's processes: other builds on a shared host, the kernel.
    pub elsewhere: f64,
    /// Time the hypervisor gave this machine's cores to others (steal).
    pub stolen: f64,
}

impl Machine {
    pub fn now() -> Self {
        Self {
            ticks: machine_ticks(),
            ours: own_tree_ticks(),
        }
    }

    /// What the cores did from `self` until now.
    pub fn since(&self) -> Busy {
        let later = Machine::now();
        let total = later.ticks.total.saturating_sub(self.ticks.total) as f64;
        if total == 0.0 {
            return Busy {
                elsewhere: 0.0,
                stolen: 0.0,
            };
        }
        // /proc/stat counts every core's ticks, so `total` is cores x elapsed ticks.
        let cores = |ticks: f64| ticks / total * cores() as f64;
        let busy = later.ticks.busy.saturating_sub(self.ticks.busy) as f64;
        let ours = later.ours.saturating_sub(self.ours) as f64;
        Busy {
            elsewhere: cores((busy - ours).max(0.0)),
            stolen: cores(later.ticks.steal.saturating_sub(self.ticks.steal) as f64),
        }
    }
}

/// The machine's cores.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The `cpu` line of /proc/stat: every core's ticks.
struct Ticks {
    /// Running something: user, nice, system, irq, softirq.
    busy: u64,
    steal: u64,
    total: u64,
}

fn machine_ticks() -> Ticks {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal
    let t: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| t.get(i).copied().unwrap_or(0);
    Ticks {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        steal: at(7),
        total: t.iter().sum(),
    }
}

/// CPU ticks used by this process and every living descendant of it.
fn own_tree_ticks() -> u64 {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut ticks: HashMap<u32, u64> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = stat_fields(pid) {
            children.entry(stat.parent).or_default().push(pid);
            ticks.insert(pid, stat.cpu_ticks);
        }
    }
    let mut sum = 0;
    let mut todo = vec![std::process::id()];
    while let Some(pid) = todo.pop() {
        sum += ticks.get(&pid).copied().unwrap_or(0);
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    sum
}
