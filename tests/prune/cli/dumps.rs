//! `prune --from-dir`: the plan from a dump written here (a worker pool through five rendered
//! configs, a build each, settled on the last; one node still on the second), as text and as
//! JSON; and what it refuses: `--apply` on a dump, an incomplete dump, bad flags.

use std::path::Path;

use super::*;

/// Writes the history as one `kind: List` file (and anything in `extra`) below `dir`.
pub(super) fn write_dump(dir: &Path, extra: &[Value]) {
    let mut items: Vec<Value> = (1..=5)
        .map(|n| build(n, Some(&format!("2025-0{n}-01T00:00:00Z")), "uid-worker"))
        .collect();
    items.push(mosc(5, Some("uid-worker")));
    items.push(pool(5, 5));
    items.push(node("worker-a", 5, 5));
    items.push(node("worker-b", 2, 2));
    items.push(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {"desired": {"version": "4.20.8"},
                   "history": [{"state": "Completed", "version": "4.20.8"}]}
    }));
    items.extend_from_slice(extra);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(dir.join("objects.json"), list.to_string()).expect("write the dump");
}

fn prune_dir(dir: &Path, extra: &[&str]) -> CliRun {
    let mut args = vec!["prune", "--from-dir", dir.to_str().expect("UTF-8 path")];
    args.extend_from_slice(extra);
    BIN.cli().args(&args).run()
}

#[test]
fn the_plan_lists_every_build_deletable_or_kept_with_its_reasons() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_dump(dir.path(), &[]);
    let run = prune_dir(dir.path(), &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let out = &run.stdout;
    assert!(
        out.starts_with(
            "1 of 5 MachineOSBuilds can be deleted (--keep 3, --keep-younger-than 1h)."
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "\nDELETABLE {} (MachineOSConfig worker, Succeeded, ",
            build_name(1)
        )),
        "{out}"
    );
    assert!(out.contains(&format!("  deleting it makes MCO delete .../ocb-image@sha256:010101010101... from the registry (by its tag {REPO}:{})", build_name(1))), "{out}");
    assert!(
        out.contains(&format!(
            "\nKEPT {} (MachineOSConfig worker, Succeeded, ",
            build_name(2)
        )),
        "{out}"
    );
    assert!(
        out.contains("  - 1 node runs its image: worker-b\n"),
        "{out}"
    );
    assert!(out.contains("  - it is the 2nd newest of the 5 succeeded builds of MachineOSConfig worker (--keep 3)\n"), "{out}");
    assert!(
        out.contains("Decided with the rules of OpenShift 4.20 (the cluster runs 4.20.8)."),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with("Nothing was deleted: run again with --apply to delete the deletable builds, one at a time."),
        "{out}"
    );

    let run = prune_dir(
        dir.path(),
        &["--keep", "1", "--keep-younger-than", "0s", "-o", "json"],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(builds_in(&report, "deletable"), names(&[1, 3, 4]));
    assert_eq!(builds_in(&report, "kept"), names(&[2, 5]));
    assert_eq!(report["kept"][0]["reasons"], json!(["nodeNeedsImage"]));
    assert_eq!(
        report["kept"][1]["reasons"],
        json!([
            "nodeNeedsImage",
            "poolRollingOut",
            "currentBuild",
            "poolConfiguration",
            "newest"
        ])
    );
    assert_eq!(report["deletable"][0]["deletes"], json!([image(1)]));
    assert_eq!(report["deletable"][0]["created"], "2025-01-01T00:00:00Z");
    assert_eq!(report["images"], json!([]));
    assert_eq!(
        (
            report["keep"].clone(),
            report["keepYoungerThanSeconds"].clone()
        ),
        (json!(1), json!(0))
    );
    assert_eq!(report["release"]["rules"], json!(["4.20"]));
    assert!(report.get("applied").is_none(), "{report:#}");
}

#[test]
fn apply_on_a_dump_and_an_unreadable_dump_are_errors_with_nothing_on_stdout() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_dump(dir.path(), &[]);
    let run = prune_dir(dir.path(), &["--apply"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("--apply deletes on the live cluster"),
        "{run:?}"
    );

    // A file that claims MachineOSBuilds and cannot be read whole: incomplete, unless allowed.
    std::fs::write(
        dir.path().join("machineosbuilds.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineOSBuild\nmetadata: [\n",
    )
    .expect("write");
    let run = prune_dir(dir.path(), &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stdout.is_empty() && run.stderr.contains("is incomplete"),
        "{run:?}"
    );
    let run = prune_dir(dir.path(), &["--allow-incomplete", "-o", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert!(
        report["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w
                .as_str()
                .is_some_and(|w| w.contains("machineosbuilds.yaml")))),
        "{report:#}"
    );

    for bad in [
        &["--keep-younger-than", "soon"][..],
        // More hours than a signed duration holds: a usage error, not a panic.
        &["--keep-younger-than", "9999999999999999d"],
        &["--keep", "-1"],
        &["--timeout", "5m"],
        &["--images"],
    ] {
        let run = prune_dir(dir.path(), bad);
        assert_eq!(run.code, Some(2), "{bad:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{bad:?}: {run:?}");
    }
}

#[test]
fn days_and_long_ages_are_accepted() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_dump(dir.path(), &[]);
    // Every build is months old: 30 days keeps none of them for their age, 3650 days all.
    let json = |age: &str| {
        prune_dir(
            dir.path(),
            &["--keep-younger-than", age, "--keep", "0", "-o", "json"],
        )
        .json()
    };
    assert_eq!(builds_in(&json("30d"), "deletable"), names(&[1, 3, 4]));
    assert!(builds_in(&json("3650d"), "deletable").is_empty());
}

#[test]
fn the_fixture_of_a_superseded_build_keeps_every_build() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/superseded-build");
    let run = prune_dir(
        &dir,
        &["-o", "json", "--keep", "0", "--keep-younger-than", "0s"],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert!(builds_in(&report, "deletable").is_empty(), "{report:#}");
    let reasons: Vec<Value> = report["kept"]
        .as_array()
        .expect("kept")
        .iter()
        .map(|k| k["reasons"].clone())
        .collect();
    assert_eq!(
        reasons,
        [
            json!(["nodeNeedsImage", "currentBuild", "poolConfiguration"]),
            json!(["currentBuild", "poolConfiguration"]),
            json!(["poolConfiguration", "building"]),
        ],
        "{report:#}"
    );
}
