//! Copies of one object: resourceVersions, disagreeing copies, their combinations.

use super::*;

fn mosc_with(rv: &str, pool: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"{rv}\"
spec:
  machineConfigPool:
    name: {pool}
"
    )
}

fn pool_of_worker(loaded: &Loaded) -> String {
    assert_eq!(loaded.snapshot.machine_os_configs.len(), 1, "deduplicated");
    let mosc = &loaded.snapshot.machine_os_configs[0];
    mosc.spec
        .machine_config_pool
        .as_ref()
        .map(|p| p.name.clone())
        .unwrap_or_default()
}

#[test]
fn duplicates_keep_the_newest_resource_version() {
    // Numerically newer wins even though it is read first ("900" < "1000" as text).
    let loaded = load(&[
        ("a/single.yaml", &mosc_with("1000", "newer")),
        (
            "b/list.yaml",
            &format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}",
                mosc_with("900", "older").replace('\n', "\n  ")
            ),
        ),
    ]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    assert_eq!(pool_of_worker(&loaded), "newer");

    let loaded = load(&[
        ("a.yaml", &mosc_with("7", "older")),
        ("b.yaml", &mosc_with("8", "newer")),
    ]);
    assert_eq!(pool_of_worker(&loaded), "newer");
}

#[test]
fn disagreeing_copies_without_comparable_versions_are_all_kept() {
    for (a, b) in [("", "5"), ("5", "5")] {
        let loaded = load(&[
            ("b.yaml", &mosc_with(a, "later")),
            ("a.yaml", &mosc_with(b, "earlier")),
        ]);
        assert_eq!(
            pool_of_worker(&loaded),
            "later",
            "the copy read last comes first"
        );
        assert_eq!(loaded.variants.len(), 1, "{a:?} vs {b:?}");
        let other = &loaded.variants[0].machine_os_configs[0];
        assert_eq!(other.pool_name(), "earlier");
        assert!(loaded.variant_note().is_some());
    }
    // Copies that agree on everything the policy reads are one object.
    let loaded = load(&[
        ("a.yaml", &mosc_with("", "same")),
        ("b.yaml", &mosc_with("5", "same")),
    ]);
    assert!(loaded.variants.is_empty());
    assert_eq!(pool_of_worker(&loaded), "same");
}

#[test]
fn too_many_disagreeing_copies_make_the_dump_incomplete() {
    let files: Vec<(String, String)> = (0..7)
        .flat_map(|i| {
            let node = |v: &str| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels:\n    v: \"{v}\"\n");
            [(format!("a/n{i}.yaml"), node("a")), (format!("b/n{i}.yaml"), node("b"))]
        })
        .chain([("pool.yaml".to_string(), POOL.to_string())])
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let loaded = load(&refs);
    assert_eq!(loaded.incomplete.len(), 1, "{:?}", loaded.incomplete);
    assert!(
        loaded.incomplete[0].contains("copies of 7 objects disagree"),
        "{:?}",
        loaded.incomplete
    );
}

#[test]
fn empty_directory_is_an_empty_snapshot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let loaded = load_dir(dir.path()).expect("empty dir loads");
    assert!(loaded.warnings.is_empty());
    let snap = loaded.snapshot;
    assert!(snap.machine_os_configs.is_empty() && snap.nodes.is_empty());
}

#[test]
fn missing_directory_is_an_error_with_path_and_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope");
    let err = load_dir(&missing).expect_err("missing dir");
    let DumpError::ReadDir { path, reason } = &err;
    assert_eq!(path, &missing);
    assert_eq!(reason.kind(), io::ErrorKind::NotFound);
    let text = err.to_string();
    assert!(
        text.contains("nope") && text.contains("No such file"),
        "{text}"
    );

    let file = dir.path().join("file.yaml");
    fs::write(&file, MOSC).expect("write");
    assert!(load_dir(&file).is_err(), "a file is not a directory");
}
