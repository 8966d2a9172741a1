//! `hack/test.sh`, the runner of every tier, sourced by bash: the test binaries it finds in
//! cargo's messages, the totals line, the failures it lists and the time summary, on canned
//! input (a wrong parse would run no test at all, a wrong total would hide a failure).

use std::path::Path;
use std::process::Command;

use testkit::process::output_text;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs `script` in bash after sourcing hack/test.sh, in a temporary directory holding
/// `files`; returns its stdout.
fn sourced(script: &str, files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    }
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; cd {}; {script}",
            Path::new(ROOT).join("hack/test.sh").display(),
            dir.path().display()
        ))
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn only_test_profile_artifacts_with_an_executable_are_test_binaries() {
    let messages = [
        // A dependency: `"test":true` in its target, not in its profile.
        r#"{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#serde@1.0.229","manifest_path":"/r/serde-1.0.229/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"serde","src_path":"/r/serde-1.0.229/src/lib.rs","edition":"2021","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":0,"debug_assertions":true,"overflow_checks":true,"test":false},"features":["std"],"filenames":["/w/target/debug/deps/libserde-ec38.rlib"],"executable":null,"fresh":true}"#,
        r#"{"reason":"compiler-artifact","package_id":"path+file:///w#mosc-guard@0.1.0","manifest_path":"/w/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"mosc_guard","src_path":"/w/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":"line-tables-only","debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/mosc_guard-4af7"],"executable":"/w/target/debug/deps/mosc_guard-4af7","fresh":true}"#,
        r#"{"reason":"compiler-message","package_id":"path+file:///w#mosc-guard@0.1.0","manifest_path":"/w/Cargo.toml","target":{"kind":["test"],"name":"check","test":true},"message":{"rendered":"warning: unused"}}"#,
        r#"{"reason":"compiler-artifact","package_id":"path+file:///w#mosc-guard@0.1.0","manifest_path":"/w/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"check","src_path":"/w/tests/check/main.rs","edition":"2024","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":"line-tables-only","debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/check-bfb9"],"executable":"/w/target/debug/deps/check-bfb9","fresh":false}"#,
        r#"{"reason":"compiler-artifact","package_id":"path+file:///w/testkit#0.1.0","manifest_path":"/w/testkit/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"testkit","src_path":"/w/testkit/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":"line-tables-only","debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/w/target/debug/deps/testkit-f6e3"],"executable":"/w/target/debug/deps/testkit-f6e3","fresh":true}"#,
        r#"{"reason":"build-finished","success":true}"#,
    ]
    .join("\n");
    let listed = sourced("artifacts < messages.json", &[("messages.json", &messages)]);
    assert_eq!(
        listed,
        "mosc_guard\t/w\t/w/target/debug/deps/mosc_guard-4af7\n\
         check\t/w\t/w/target/debug/deps/check-bfb9\n\
         testkit\t/w/testkit\t/w/target/debug/deps/testkit-f6e3\n"
    );
}

const PASSED: &str = "running 3 tests\ntest a ... ok\n\
    test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.00s\n";
const FAILED: &str = "running 2 tests\n\
    test cli::a ... FAILED\ntest pool::b ... FAILED\n\nfailures:\n\n\
    ---- cli::a stdout ----\n\
    thread 'cli::a' (14957) panicked at tests/recover/cli/live.rs:43:42:\n\
    control plane: connection closed before message completed\n\
    stack backtrace:\n   0: rust_begin_unwind\n\
    ---- pool::b stdout ----\n\
    thread 'pool::b' (1) panicked at tests/recover/pool/x.rs:1:5:\n\
    assertion `left == right` failed\n  left: Some(1)\n right: Some(0)\n\
    note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\
    test result: FAILED. 5 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.00s\n";

#[test]
fn the_totals_add_every_binary_up() {
    let totals = sourced(
        "logs=logs; totals",
        &[("logs/check.log", PASSED), ("logs/recover.log", FAILED)],
    );
    assert_eq!(totals, "tests: 8 passed, 2 failed, 1 skipped\n");
}

#[test]
fn failures_name_each_panic_with_its_message_and_no_backtrace() {
    let listed = sourced(
        "logs=logs; failures",
        &[("logs/check.log", PASSED), ("logs/recover.log", FAILED)],
    );
    assert_eq!(
        listed,
        "  [recover] thread 'cli::a' (14957) panicked at tests/recover/cli/live.rs:43:42:\n\
         \x20     control plane: connection closed before message completed\n\
         \x20 [recover] thread 'pool::b' (1) panicked at tests/recover/pool/x.rs:1:5:\n\
         \x20     assertion `left == right` failed\n\
         \x20       left: Some(1)\n\
         \x20      right: Some(0)\n"
    );
}

#[test]
fn the_summary_lists_tiers_and_the_slowest_binaries_first() {
    let times = "tier\tbuild\t65\t0\n\
                 binary\tcheck\t35\t0\n\
                 binary\tmco\t513\t0\n\
                 binary\trecover\t299\t101\n\
                 tier\tcargo\t854\t1\n";
    let summary = sourced("times=times.tsv; summary", &[("times.tsv", times)]);
    assert_eq!(
        summary,
        "== where the time went (seconds) ==\n\
         \x20 tier build                 65\n\
         \x20 tier cargo                854  (failed)\n\
         \x20 slowest test binaries:\n\
         \x20   mco                513\n\
         \x20   recover            299  (failed)\n\
         \x20   check               35\n"
    );
}

#[test]
fn the_pool_ends_with_its_last_entry_whatever_runs_beside_it() {
    // `make test` runs the image and node tiers beside the cargo tier's pool: a job of the
    // caller's ending must neither free a slot of the pool nor count as one of its entries.
    let script = "printf 'a\\t%s\\t%s/a.sh\\nb\\t%s\\t%s/b.sh\\n' \"$PWD\" \"$PWD\" \"$PWD\" \"$PWD\" >list.tsv; \
                  chmod +x a.sh b.sh; mkdir -p logs; \
                  list=list.tsv logs=logs times=times.tsv jobs=1; : >times.tsv; \
                  sleep 0.2 & \
                  pool a b 2>/dev/null; \
                  cut -f2 times.tsv | tr '\\n' ' '; wait";
    let ended = sourced(
        script,
        &[
            ("a.sh", "#!/bin/sh\nsleep 1\n"),
            ("b.sh", "#!/bin/sh\nsleep 1\n"),
        ],
    );
    assert_eq!(ended, "a b ", "the pool returned before b ended");
}

#[test]
fn stop_tree_stops_a_job_and_what_it_started() {
    // `make test` stops the builds it started beside lint when lint fails: the job (a shell)
    // and the programs that shell started (a zombie not reaped yet counts as stopped).
    let script = "bash -c 'sleep 30 & echo $! >grandchild; wait' & job=$!; \
                  while [[ ! -s grandchild ]]; do sleep 0.05; done; \
                  stop_tree \"$job\"; wait \"$job\" 2>/dev/null || true; sleep 0.2; \
                  state=\"$(awk '{ print $3 }' /proc/\"$(cat grandchild)\"/stat 2>/dev/null || true)\"; \
                  if [[ -n \"$state\" && \"$state\" != Z ]]; then echo running; else echo stopped; fi";
    assert_eq!(
        sourced(script, &[]),
        "stopped\n",
        "a program the job started outlived it"
    );
}
