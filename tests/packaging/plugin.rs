//! `oc mosc-guard` / `kubectl mosc-guard`: the binary installed as a kubectl plugin.
//!
//! `make install-plugin PREFIX=<tmp> PLUGIN_BIN=<the test build>` installs it (the Makefile's
//! own recipe, without the release build), then the real `/usr/bin/kubectl` runs it from PATH:
//! `kubectl mosc-guard --version`, `kubectl mosc-guard images --from-dir` on an empty dump,
//! `kubectl mosc-guard check ... --from-dir` on a fixture (the
//! same output and exit status as the binary run directly), `kubectl mosc-guard recover
//! --from-dir` on a degraded pool's must-gather, `kubectl mosc-guard prune --from-dir` on a
//! fixture, and `kubectl plugin list` finds it. The krew manifest (`plugins/mosc-guard.yaml`) names the file kubectl looks for and
//! carries the placeholder sha256 on the line the release step rewrites; the release archive
//! `make plugin-archive` (`hack/plugin-archive.sh`) packs holds the image's static musl binary
//! as that file, with the manifest written beside it carrying its sum (`#[ignore]`d: the image
//! tier runs it, once it has built that binary).
//! `oc` is not installed here; it runs plugins from PATH by the same rule.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use testkit::guard::GuardBin;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const KUBECTL: &str = "/usr/bin/kubectl";

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `make install-plugin` into `prefix`, installing the test build.
fn install(prefix: &Path) -> PathBuf {
    let out = Command::new("make")
        .current_dir(ROOT)
        .args(["--no-print-directory", "install-plugin"])
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("PLUGIN_BIN={}", BIN.path().display()))
        .output()
        .expect("run make");
    assert!(out.status.success(), "make install-plugin: {}", text(&out));
    let plugin = prefix.join("bin/kubectl-mosc_guard");
    assert!(plugin.is_file(), "{} installed", plugin.display());
    plugin
}

/// `/usr/bin/kubectl ARGS` with `bin_dir` first on PATH and no kubeconfig at all.
fn kubectl(bin_dir: &Path, home: &Path, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(KUBECTL)
        .args(args)
        .current_dir(ROOT)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .output()
        .expect("run /usr/bin/kubectl")
}

#[test]
fn kubectl_runs_the_installed_plugin() {
    let prefix = tempfile::tempdir().expect("tempdir");
    let home = tempfile::tempdir().expect("tempdir");
    let plugin = install(prefix.path());
    let bin_dir = plugin.parent().expect("bin dir");
    assert!(bin_dir.join("mosc-guard").is_file(), "mosc-guard beside it");

    let out = kubectl(bin_dir, home.path(), &["mosc-guard", "--version"]);
    assert!(out.status.success(), "{}", text(&out));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains(env!("CARGO_PKG_VERSION")),
        "kubectl mosc-guard --version: {version}"
    );

    // A fixture held mid-rollout: blocked (exit 1), in the very words of the binary itself.
    let fixture = "tests/fixtures/must-gather-rolling";
    for extra in [&[][..], &["-o", "json"][..]] {
        let mut args = vec!["mosc-guard", "check", "worker", "--from-dir", fixture];
        args.extend_from_slice(extra);
        let via = kubectl(bin_dir, home.path(), &args);
        assert_eq!(via.status.code(), Some(1), "{}", text(&via));
        let direct_out = std::process::Command::new(BIN.path())
            .args(&args[1..])
            .current_dir(ROOT)
            .env_remove("RUST_LOG")
            .output()
            .expect("run mosc-guard");
        assert_eq!(
            String::from_utf8_lossy(&via.stdout),
            String::from_utf8_lossy(&direct_out.stdout),
            "the plugin prints what the binary prints"
        );
        assert_eq!(via.status.code(), direct_out.status.code());
        if extra.is_empty() {
            let stdout = String::from_utf8_lossy(&via.stdout);
            assert!(
                stdout.contains("machineosconfig \"worker\" cannot be deleted yet"),
                "{stdout}"
            );
        } else {
            let report: Value = serde_json::from_slice(&via.stdout).expect("JSON report");
            assert_eq!(report["allowed"], false);
            assert_eq!(report["target"]["name"], "worker");
        }
    }
    // `check --all` too.
    let out = kubectl(
        bin_dir,
        home.path(),
        &["mosc-guard", "check", "--all", "--from-dir", fixture],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("worker"),
        "{}",
        text(&out)
    );

    // `recover` too: the plan for a must-gather of a degraded pool, nothing written.
    let out = kubectl(
        bin_dir,
        home.path(),
        &[
            "mosc-guard",
            "recover",
            "--from-dir",
            "tests/fixtures/degraded-lost-image",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("RECOVERABLE node ip-10-0-11-240.us-east-2.compute.internal"),
        "{}",
        text(&out)
    );

    // `images` too: a dump with nothing layered needs no image, and asks no registry.
    let empty = tempfile::tempdir().expect("tempdir");
    let dir = empty.path().to_str().expect("utf-8");
    let out = kubectl(
        bin_dir,
        home.path(),
        &["mosc-guard", "images", "--from-dir", dir, "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(listed["images"], serde_json::json!([]), "{}", text(&out));
    // `prune` too: the plan for a must-gather, nothing written.
    let out = kubectl(
        bin_dir,
        home.path(),
        &[
            "mosc-guard",
            "prune",
            "--from-dir",
            "tests/fixtures/superseded-build",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("0 of 3 MachineOSBuilds can be deleted"),
        "{}",
        text(&out)
    );

    // kubectl finds it among its plugins, under the name it runs it by.
    let out = kubectl(bin_dir, home.path(), &["plugin", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.lines().any(|l| l.trim() == plugin.to_string_lossy()),
        "kubectl plugin list names {}: {}",
        plugin.display(),
        text(&out)
    );
    // (It also finds the real mosc-guard binary beside it, which is not a plugin name.)
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("kubectl-mosc_guard is not executable"),
        "{}",
        text(&out)
    );
}

/// What a release writes over the committed manifest's sha256 (`hack/plugin-archive.sh`:
/// `s/^\(      sha256: \).*/...`): the one line of `plugins/mosc-guard.yaml` starting so.
const SHA256_LINE: &str = "      sha256: ";
/// The committed manifest's sha256 until a release fills it in.
const PLACEHOLDER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn committed_manifest() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("plugins/mosc-guard.yaml"))
        .expect("read plugins/mosc-guard.yaml")
}

fn archive_name() -> String {
    format!(
        "mosc-guard_v{}_linux_amd64.tar.gz",
        env!("CARGO_PKG_VERSION")
    )
}

/// The committed manifest names the file kubectl runs and carries the placeholder sha256, on
/// the one line the release step rewrites (so a release can never publish it unfilled, and
/// a real sum committed by mistake fails here). That the release step fills it with the
/// archive's sum is the ignored test below.
#[test]
fn krew_manifest_names_the_plugin_file_and_carries_the_placeholder_sum() {
    let text = committed_manifest();
    let manifest: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    // krew links `bin` as kubectl-<name with - as _>: the file `kubectl mosc-guard` runs.
    assert_eq!(manifest["metadata"]["name"], "mosc-guard");
    assert_eq!(
        manifest["spec"]["version"],
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "the manifest's version is the crate's"
    );
    let platforms = manifest["spec"]["platforms"].as_array().expect("platforms");
    assert_eq!(platforms.len(), 1, "one archive, one sum to fill in");
    let platform = &platforms[0];
    assert_eq!(platform["bin"], "kubectl-mosc_guard");
    assert_eq!(platform["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(platform["selector"]["matchLabels"]["arch"], "amd64");
    let uri = platform["uri"].as_str().expect("uri");
    assert!(uri.ends_with(&archive_name()), "{uri}");
    assert_eq!(
        platform["sha256"], PLACEHOLDER,
        "the committed sum is the placeholder"
    );
    let rewritten: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(SHA256_LINE))
        .collect();
    assert_eq!(
        rewritten,
        [format!("{SHA256_LINE}\"{PLACEHOLDER}\"")],
        "the release step rewrites exactly the placeholder's line"
    );
}

/// Where cargo puts the static musl release build `hack/plugin-archive.sh` packs (the one
/// `hack/image-context.sh` puts into the image).
fn static_binary() -> PathBuf {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || Path::new(ROOT).join("target"),
            |d| Path::new(ROOT).join(d),
        );
    target_dir.join("x86_64-unknown-linux-musl/release/mosc-guard")
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("sum")
        .to_owned()
}

/// `make plugin-archive` (`hack/plugin-archive.sh` with no `PLUGIN_BIN`), as a release runs
/// it, into `out`.
fn plugin_archive(out: &Path) -> PathBuf {
    let run = Command::new(Path::new(ROOT).join("hack/plugin-archive.sh"))
        .env("OUT", out)
        .env_remove("PLUGIN_BIN")
        .output()
        .expect("run hack/plugin-archive.sh");
    assert!(run.status.success(), "{}", text(&run));
    let archive = out.join(archive_name());
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        archive.to_string_lossy(),
        "it prints the archive's path"
    );
    archive
}

/// The release archive, built as a release builds it: from the static musl release binary
/// the image carries, which takes minutes to build on 2 cores. So it is `#[ignore]`d here and
/// run by the image tier (`make image-test`, `hack/image.sh test`, with `--ignored`) right after
/// `hack/image.sh build` has built that binary, so the script's own build finds it done.
/// The archive holds exactly that binary as the file `bin` names, statically linked; the
/// manifest written beside it is the committed one with only the placeholder replaced, by the
/// archive's sum as computed here; packing twice gives the same archive.
#[test]
#[ignore = "builds the static musl release binary: run by the image tier (make image-test)"]
fn the_release_archive_holds_the_static_binary_and_the_manifest_its_sum() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let archive = plugin_archive(out_dir.path());
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .expect("tar");
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout).trim(),
        "kubectl-mosc_guard"
    );
    let unpacked = tempfile::tempdir().expect("tempdir");
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path())
        .output()
        .expect("tar");
    assert!(untar.status.success(), "{}", text(&untar));
    let packed = unpacked.path().join("kubectl-mosc_guard");
    let binary = static_binary();
    assert_eq!(
        std::fs::read(&packed).expect("read the packed binary"),
        std::fs::read(&binary).unwrap_or_else(|e| panic!("read {}: {e}", binary.display())),
        "the archive holds the static musl release build, {}",
        binary.display()
    );
    // Static: no program interpreter, no shared library.
    for (flag, dynamic) in [("-l", "Requesting program interpreter"), ("-d", "NEEDED")] {
        let out = Command::new("readelf")
            .arg(flag)
            .arg(&packed)
            .output()
            .expect("readelf");
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(dynamic),
            "statically linked: {}",
            text(&out)
        );
    }
    let version = Command::new(&packed)
        .arg("--version")
        .output()
        .expect("run the packed binary");
    assert!(version.status.success(), "{}", text(&version));
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        text(&version)
    );

    // The manifest a release publishes: the committed one, its placeholder line (and only
    // it) replaced by the archive's sum.
    let sum = sha256(&archive);
    let generated = std::fs::read_to_string(out_dir.path().join("mosc-guard.yaml")).expect("read");
    let committed = committed_manifest();
    let expected: Vec<String> = committed
        .lines()
        .map(|l| {
            if l.starts_with(SHA256_LINE) {
                format!("{SHA256_LINE}\"{sum}\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    assert_eq!(generated.lines().collect::<Vec<_>>(), expected);
    assert_ne!(sum, PLACEHOLDER);
    let parsed: Value = serde_yaml_ng::from_str(&generated).expect("generated manifest is YAML");
    assert_eq!(parsed["spec"]["platforms"][0]["sha256"], sum.as_str());

    // Packing twice gives the same archive (fixed owner, mode and times).
    let again = plugin_archive(out_dir.path());
    assert_eq!(sha256(&again), sum);
}
