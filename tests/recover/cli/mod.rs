//! `mosc-guard recover` end to end: the real binary over a must-gather of a cluster the lost-image
//! bug already hurt ([`dumps`]: `tests/fixtures/degraded-lost-image`, and edits of a copy of it),
//! and against a real kube-apiserver ([`live`]: the plan from a live cluster, and `--apply`
//! stopping where it must: a node that moved, a patch the API server refuses (made to happen by
//! [`interpose`]), a daemon that never completes the update; and [`paths`]: a node gone, one
//! fixed meanwhile, failed reads and writes, an unwritable Event, `--wait` ending gone or timed
//! out); [`registry`]: a plan from a must-gather asking a real registry with `--authfile`; and
//! `serve`'s gauge of stuck nodes ([`gauge`]). `--apply`'s happy path needs the
//! simulated daemon's no-op update: tests/recover/pool (the harness) drives it.
//!
//! Contract: exit 0 when nothing needs a person, 1 when some node does, 2 when the input cannot
//! be read (nothing on stdout then); `--output json` prints one object on stdout.

mod dumps;
mod gauge;
mod interpose;
mod live;
mod paths;
mod registry;

use std::path::{Path, PathBuf};

use serde_json::Value;
use testkit::cli::CliRun;
use testkit::guard::GuardBin;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
/// The node the fixture's bug left behind.
const STUCK: &str = "ip-10-0-11-240.us-east-2.compute.internal";
const LOST_IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63c4e0f2a7b5d8193e6f4a2c0b7d9e8f1a3c5b7d9e0f2a4c6b8d0e";
const MARKER: &str = "mosc-guard.dev/recovery";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/degraded-lost-image")
}

fn mosc_guard(args: &[&str]) -> CliRun {
    BIN.cli().args(args).run()
}

/// `mosc-guard recover EXTRA... --from-dir DIR`
fn recover_dir(dir: &Path, extra: &[&str]) -> CliRun {
    let mut args = vec!["recover"];
    args.extend_from_slice(extra);
    args.extend(["--from-dir", dir.to_str().expect("UTF-8 path")]);
    mosc_guard(&args)
}

/// The names listed under `key` of a JSON report.
fn nodes_in(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is an array: {report:#}"))
        .iter()
        .map(|n| n["node"].as_str().expect("node").to_string())
        .collect()
}
