//! `hack/fresh-check.sh --deps-only`, the check that every program the tiers start is
//! installed by `hack/install-deps.sh` or always there (`make lint` runs it), and
//! `hack/commands.awk`, which finds those programs: on this tree, on a tree that starts a
//! program nothing installs, and on shell, Makefile and Rust written to trip it up.
//! (The whole fresh check, a clone with empty caches, is not run here: it takes an hour.)

use std::path::Path;
use std::process::{Command, Output};

use testkit::process::output_text;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn deps_only(root: &Path, quiet: bool) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("hack/fresh-check.sh")).arg("--deps-only");
    if quiet {
        cmd.arg("--quiet");
    }
    cmd.output().expect("run hack/fresh-check.sh")
}

/// `hack/commands.awk FILE` on `content` written as `name`: (program, line, how) per use.
fn scan(name: &str, content: &str) -> Vec<(String, u32, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(name), content).expect("write");
    let out = Command::new("awk")
        .arg("-f")
        .arg(Path::new(ROOT).join("hack/commands.awk"))
        .arg(name)
        .current_dir(dir.path())
        .output()
        .expect("run awk");
    assert!(out.status.success(), "{}", output_text(&out));
    let mut uses: Vec<(String, u32, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "{l:?}");
            let (file, line) = f[1].rsplit_once(':').expect("FILE:LINE");
            assert_eq!(file, name, "{l:?}");
            (
                f[0].to_owned(),
                line.parse().expect("line"),
                f[2].to_owned(),
            )
        })
        .collect();
    uses.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    uses
}

fn runs(uses: &[(&str, u32)]) -> Vec<(String, u32, String)> {
    uses.iter()
        .map(|(p, l)| ((*p).to_owned(), *l, "run".to_owned()))
        .collect()
}

#[test]
fn every_program_the_tiers_start_is_installed_or_always_there() {
    let out = deps_only(Path::new(ROOT), true);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        output_text(&out)
    );
    // The listing names the programs the issue was about, with where they come from.
    let out = deps_only(Path::new(ROOT), false);
    assert!(out.status.success(), "{}", output_text(&out));
    let listing = String::from_utf8_lossy(&out.stdout);
    for (program, source) in [
        ("runc", "Debian package runc"),
        ("podman", "Debian package podman"),
        ("kubectl", "Debian package kubernetes-client"),
        ("promtool", "Debian package prometheus"),
        ("cargo-deny", "else cargo install; version"),
        ("bash", "always there"),
    ] {
        assert!(
            listing
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{program} ")) && l.contains(source)),
            "{program} ({source}) in:\n{listing}"
        );
    }
}

#[test]
fn a_program_nothing_installs_fails_the_check_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    for file in ["fresh-check.sh", "commands.awk", "install-deps.sh"] {
        let to = dir.path().join("hack").join(file);
        std::fs::create_dir_all(to.parent().unwrap()).expect("mkdir");
        std::fs::copy(Path::new(ROOT).join("hack").join(file), &to).expect("copy");
    }
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    // Written so that this file's own source does not name the program to the scanner.
    let call = format!("Command::new({:?})", "frobnicate");
    std::fs::write(
        dir.path().join("tests/new.rs"),
        format!("fn f() {{\n    let _ = std::process::{call}.status();\n}}\n"),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("hack/new.sh"),
        "#!/usr/bin/env bash\nset -eu\njq . \"$1\"\n",
    )
    .expect("write");
    let out = deps_only(dir.path(), true);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FAILED"), "{stderr}");
    assert!(
        stderr.contains("frobnicate, started at: tests/new.rs:2"),
        "{stderr}"
    );
    assert!(stderr.contains("jq, started at: hack/new.sh:3"), "{stderr}");
    assert!(stderr.contains("need PROGRAM DEBIAN-PACKAGE"), "{stderr}");
}

#[test]
fn the_scanner_finds_the_commands_of_a_shell_script() {
    // `notcmdN` are words that are not commands: in a comment, a for list, an array, strings,
    // a here-document, an argument on a continued line.
    let script = r#"#!/usr/bin/env bash
# a comment: notcmd0 is not a command
set -euo pipefail
usage() { sed -n '2p' "$0"; }
x="$(alpha --flag | beta)"
if ! gamma -q; then delta; fi
for e in notcmd1 notcmd2; do epsilon "$e"; done
case "$1" in
    build) zeta ;;
    -h|--help) usage ;;
esac
arr=(notcmd3 notcmd4)
v="notcmd5; notcmd6"
echo 'single; notcmd7' | eta
"$engine" build
$dyn run
command -v theta >/dev/null || iota
nice -n 10 kappa arg
env -u VAR FOO=1 lambda
xargs -0 mu </dev/null 2>&1
cat <<'END'
notcmd8 here
END
((n > 3)) && nu
[[ -n "$x" && -z "$y" ]] || xi
exec 9>"/tmp/lock"
omicron \
  --arg notcmd9 | sigma
hack/local.sh "$(tau)"
/usr/bin/pi
echo `rho` ${v:-$n} $((1 << 2))
"#;
    let mut want = runs(&[
        ("sed", 4),
        ("alpha", 5),
        ("beta", 5),
        ("delta", 6),
        ("gamma", 6),
        ("epsilon", 7),
        ("zeta", 9),
        ("eta", 14),
        ("iota", 17),
        ("kappa", 18),
        ("nice", 18),
        ("env", 19),
        ("lambda", 19),
        ("mu", 20),
        ("xargs", 20),
        ("cat", 21),
        ("nu", 24),
        ("xi", 25),
        ("omicron", 27),
        ("sigma", 28),
        ("tau", 29),
        ("pi", 30),
        ("rho", 31),
    ]);
    want.push(("theta".to_owned(), 17, "lookup".to_owned()));
    want.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    assert_eq!(scan("script.sh", script), want);
}

#[test]
fn the_scanner_reads_makefile_recipes_and_rust() {
    let makefile = "CARGO ?= cargo\nVERSION := $(shell notcmd0 x)\n\
                    all:\n\
                    \t$(CARGO) build\n\
                    \t@alpha $(FLAGS) >$@\n\
                    \t-beta; report=\"$$(gamma)\"; \\\n\
                    \t  delta \"$$report\" --opt notcmd1 \\\n\
                    \t  | epsilon\n\
                    notcmd2: ; \n";
    assert_eq!(
        scan("Makefile", makefile),
        runs(&[
            ("alpha", 5),
            ("beta", 6),
            ("gamma", 6),
            ("delta", 7),
            ("epsilon", 8)
        ])
    );

    let rust = format!(
        "const TOOL: &str = \"/usr/bin/alpha\";\n\
         fn f() {{\n\
         \x20   let _ = Command::new({:?});\n\
         \x20   let _ = Command::new(TOOL);\n\
         \x20   let _ = Command::new(path_of_something);\n\
         \x20   let _ = Command::new(Path::new(ROOT).join(\"hack/x.sh\"));\n\
         \x20   let args = [\"{}\",\n        \"gamma\"];\n\
         }}\n",
        "beta", "--runtime"
    );
    assert_eq!(
        scan("x.rs", &rust),
        runs(&[("beta", 3), ("alpha", 4), ("gamma", 7)])
    );
}
