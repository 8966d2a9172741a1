//! `oc mosc-guard` / `kubectl mosc-guard`: the binary installed as a kubectl plugin.
//!
//! `make install-plugin PREFIX=<tmp> PLUGIN_BIN=<the test build>` installs it (the Makefile's
//! own recipe, without the release build), then the real `/usr/bin/kubectl` runs it from PATH:
//! `kubectl mosc-guard --version`, `kubectl mosc-guard check ... --from-dir` on a fixture (the
//! same output and exit status as the binary run directly), and `kubectl plugin list` finds
//! it. The krew manifest (`plugins/mosc-guard.yaml`) names the file kubectl looks for, and the
//! archive `hack/plugin-archive.sh` packs holds that file with the manifest's sha256.
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

#[test]
fn krew_manifest_names_the_plugin_file_and_the_archive_matches() {
    let manifest: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(Path::new(ROOT).join("plugins/mosc-guard.yaml"))
            .expect("read plugins/mosc-guard.yaml"),
    )
    .expect("YAML");
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
    let platform = &manifest["spec"]["platforms"][0];
    assert_eq!(platform["bin"], "kubectl-mosc_guard");
    assert_eq!(platform["selector"]["matchLabels"]["os"], "linux");
    let uri = platform["uri"].as_str().expect("uri");
    let archive_name = format!(
        "mosc-guard_v{}_linux_amd64.tar.gz",
        env!("CARGO_PKG_VERSION")
    );
    assert!(uri.ends_with(&archive_name), "{uri}");

    // The release archive, packed from the test build: it holds exactly the file `bin` names,
    // and the generated manifest carries its sha256.
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(Path::new(ROOT).join("hack/plugin-archive.sh"))
        .env("OUT", out_dir.path())
        .env("PLUGIN_BIN", BIN.path())
        .output()
        .expect("run hack/plugin-archive.sh");
    assert!(out.status.success(), "{}", text(&out));
    let archive = out_dir.path().join(&archive_name);
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .expect("tar");
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout).trim(),
        "kubectl-mosc_guard"
    );
    let sum = Command::new("sha256sum")
        .arg(&archive)
        .output()
        .expect("sha256sum");
    let sum = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .expect("sum")
        .to_owned();
    let generated: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(out_dir.path().join("mosc-guard.yaml")).expect("read"),
    )
    .expect("generated manifest is YAML");
    assert_eq!(generated["spec"]["platforms"][0]["sha256"], sum.as_str());
    // Everything else is the committed manifest.
    let mut same = generated.clone();
    same["spec"]["platforms"][0]["sha256"] = platform["sha256"].clone();
    assert_eq!(same, manifest);
    // Packing twice gives the same archive (fixed owner, mode and times).
    let again = Command::new(Path::new(ROOT).join("hack/plugin-archive.sh"))
        .env("OUT", out_dir.path())
        .env("PLUGIN_BIN", BIN.path())
        .output()
        .expect("run hack/plugin-archive.sh");
    assert!(again.status.success(), "{}", text(&again));
    let sum2 = Command::new("sha256sum")
        .arg(&archive)
        .output()
        .expect("sha256sum");
    assert!(String::from_utf8_lossy(&sum2.stdout).starts_with(&sum));
}
