//! Verdicts over the fixture trees: a rolling pool blocks (text and JSON, every target spelling), a
//! settled one may go (unless `--policy in-use`), the build being rolled, the override, noise files.

use super::*;

#[test]
fn rolling_pool_blocks_with_the_denial_message() {
    let run = check("must-gather-rolling", "machineosconfig/worker", &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stdout.starts_with(DENIAL_HEAD), "{run:?}");
    assert!(run.stdout.contains(ROLLING_NODE), "{run:?}");
    assert!(run.stdout.contains(SHORT_IMAGE), "{run:?}");
    assert!(
        run.stdout.contains("mosc-guard.dev/allow-deletion"),
        "{run:?}"
    );
    for settled in &WORKERS[1..] {
        // Not a blocking node, but named as one MCO updates next.
        assert!(
            !run.stdout.contains(&format!("  {settled} (pool")),
            "{settled} is not rolling: {run:?}"
        );
    }
    assert!(
        run.stdout.contains(&format!(
            "3 nodes do not run it yet: {}; MCO updates them one after another",
            WORKERS.join(", ")
        )),
        "{run:?}"
    );
}

#[test]
fn rolling_pool_blocks_in_json() {
    let run = check(
        "must-gather-rolling",
        "machineosconfig/worker",
        &["--output", "json"],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    let mut out = run.json();
    // Skipped noise files are reported in the JSON too, exactly as on stderr.
    let warnings = out["warnings"].take();
    let on_stderr: Vec<String> = run
        .stderr_lines()
        .iter()
        .map(|l| l.trim_start_matches("warning: ").to_string())
        .collect();
    assert_eq!(warnings, json!(on_stderr), "{run:?}");
    assert_eq!(
        warnings.as_array().map(Vec::len),
        Some(NOISE.len()),
        "{run:?}"
    );
    assert_eq!(
        out,
        json!({
            "target": {"kind": "MachineOSConfig", "name": "worker"},
            "allowed": false,
            "policy": "in-flight",
            "overridden": false,
            "images": [{"image": IMAGE, "machineOSBuild": MOSB}],
            "blockingNodes": [rolling_blocker(json!(MOSB))],
            // None of the three workers runs the image yet; the must-gather's pool reports
            // Updating, 0 of 3 machines updated.
            "rollingPools": [{"pool": "worker", "image": IMAGE, "pendingNodes": 3, "nextNodes": WORKERS,
                              "updatedMachines": 0, "machines": 3}],
            "joiningMachines": [],
            // The must-gather's ClusterVersion.
            "release": {"version": "4.20.8", "alsoRunning": [], "upgrading": false, "rules": ["4.20"]},
            "warnings": null,
        }),
        "{run:?}"
    );
}

#[test]
fn target_spellings_are_equivalent() {
    let canonical = check("must-gather-rolling", "machineosconfig/worker", &[]);
    assert_eq!(canonical.code, Some(1), "{canonical:?}");
    for target in ["worker", "mosc/worker", "machineosconfigs/worker"] {
        let run = check("must-gather-rolling", target, &[]);
        assert_eq!(run.code, Some(1), "{target}: {run:?}");
        assert_eq!(run.stdout, canonical.stdout, "{target}");
    }
    let json = check("must-gather-rolling", "mosc/worker", &["-o", "json"]).json();
    assert_eq!(
        json["target"],
        json!({"kind": "MachineOSConfig", "name": "worker"})
    );
}

#[test]
fn settled_pool_may_leave_image_mode() {
    let run = check("settled-lists", "worker", &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("can be deleted"), "{run:?}");
    assert!(!run.stdout.contains("cannot"), "{run:?}");
    assert_eq!(
        run.stderr_lines(),
        Vec::<&str>::new(),
        "clean lists warn nothing"
    );

    let report = check("settled-lists", "worker", &["--output", "json"]).json();
    assert_eq!(report["allowed"], json!(true));
    assert_eq!(report["overridden"], json!(false));
    assert_eq!(report["policy"], json!("in-flight"));
    assert_eq!(report["blockingNodes"], json!([]));
    assert_eq!(
        report["images"],
        json!([{"image": IMAGE, "machineOSBuild": MOSB}]),
        "read from the MachineOSConfigList and the List of builds"
    );
}

#[test]
fn settled_pool_is_blocked_by_policy_in_use() {
    let run = check("settled-lists", "worker", &["--policy", "in-use"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stdout
            .starts_with("machineosconfig \"worker\" cannot be deleted yet: 3 nodes"),
        "{run:?}"
    );

    let run = check(
        "settled-lists",
        "worker",
        &["--policy", "in-use", "--output", "json"],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["allowed"], json!(false));
    assert_eq!(report["policy"], json!("in-use"));
    assert_eq!(blocking_names(&report), WORKERS, "workers only, by name");
    for b in report["blockingNodes"].as_array().expect("array") {
        assert_eq!(b["currentImage"], json!(IMAGE), "{b}");
        assert_eq!(b["desiredImage"], json!(IMAGE), "{b}");
        assert_eq!(b["state"], json!("Done"), "{b}");
        assert_eq!(b["pool"], json!("worker"), "{b}");
        assert_eq!(b["machineOSBuild"], json!(MOSB), "{b}");
    }
}

#[test]
fn deleting_the_build_being_rolled_is_blocked() {
    for target in [format!("machineosbuild/{MOSB}"), format!("mosb/{MOSB}")] {
        let run = check("must-gather-rolling", &target, &[]);
        assert_eq!(run.code, Some(1), "{target}: {run:?}");
        assert!(
            run.stdout.starts_with(&format!(
                "machineosbuild \"{MOSB}\" cannot be deleted yet: 1 node still needs its image."
            )),
            "{run:?}"
        );
        assert!(run.stdout.contains(ROLLING_NODE), "{run:?}");
    }

    let run = check(
        "must-gather-rolling",
        &format!("mosb/{MOSB}"),
        &["-o", "json"],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(
        report["target"],
        json!({"kind": "MachineOSBuild", "name": MOSB})
    );
    assert_eq!(report["allowed"], json!(false));
    assert_eq!(
        report["blockingNodes"],
        json!([rolling_blocker(json!(MOSB))])
    );
}

#[test]
fn builds_gone_leave_nothing_to_guard() {
    // The config points at a newer image than the one the node is rolling to, and every build
    // was deleted by hand. MCO deletes images only through builds, so deleting the config now
    // removes nothing from the registry: the rolling node keeps its image.
    let run = check("mosb-gone", "worker", &["--output", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["images"], json!([]), "{run:?}");
    assert_eq!(report["blockingNodes"], json!([]), "{run:?}");
}

#[test]
fn override_annotation_allows_with_warnings() {
    let run = check("overridden", "worker", &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("can be deleted"), "{run:?}");
    assert!(
        run.stdout.contains("replacing node ip-10-0-11-240"),
        "the override reason is shown: {run:?}"
    );

    let run = check("overridden", "worker", &["--output", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["allowed"], json!(true));
    assert_eq!(report["overridden"], json!(true));
    assert_eq!(
        report["blockingNodes"],
        json!([rolling_blocker(json!(MOSB))]),
        "the override does not hide who is at risk"
    );
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .expect("warnings is an array")
        .iter()
        .map(|w| w.as_str().expect("warnings are strings"))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("replacing node ip-10-0-11-240")),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains(ROLLING_NODE)),
        "{warnings:#?}"
    );
}

#[test]
fn noise_files_warn_on_stderr_without_changing_the_verdict() {
    let noisy = check("must-gather-rolling", "worker", &["--output", "json"]);
    assert_eq!(noisy.code, Some(1), "{noisy:?}");
    let lines = noisy.stderr_lines();
    assert_eq!(
        lines.len(),
        NOISE.len(),
        "one line per skipped file: {noisy:?}"
    );
    for (line, file) in lines.iter().zip(NOISE) {
        assert!(line.contains(file), "{file} named in {line:?}");
    }
    for quiet in [
        "timestamp",
        "event-filter.html",
        "machine-config-daemon-4xk8z",
    ] {
        assert!(!noisy.stderr.contains(quiet), "{quiet}: {noisy:?}");
    }

    // The same tree without the noise gives the same verdict, silently.
    let clean = tempfile::tempdir().expect("temp dir");
    copy_tree(&fixture("must-gather-rolling"), clean.path(), &|p| {
        !NOISE.iter().any(|n| p.ends_with(n))
    });
    let quiet = check_dir(clean.path(), "worker", &["--output", "json"]);
    assert_eq!(quiet.code, noisy.code, "{quiet:?}");
    assert_eq!(quiet.stderr_lines(), Vec::<&str>::new(), "{quiet:?}");
    let (mut quiet_json, mut noisy_json) = (quiet.json(), noisy.json());
    assert_eq!(quiet_json["warnings"].take(), json!([]));
    assert_eq!(
        noisy_json["warnings"].take().as_array().map(Vec::len),
        Some(NOISE.len())
    );
    assert_eq!(quiet_json, noisy_json);
}
