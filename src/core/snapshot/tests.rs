use serde_json::json;

use super::*;

fn pool(name: &str, rv: Option<&str>) -> Arc<MachineConfigPool> {
    let mut meta = json!({"name": name, "uid": format!("uid-{name}")});
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv);
    }
    Arc::new(serde_json::from_value(json!({"metadata": meta})).expect("pool"))
}

#[test]
fn equal_versions_mean_the_same_objects_in_any_order() {
    let a = Snapshot {
        pools: vec![pool("worker", Some("7")), pool("master", Some("3"))],
        ..Snapshot::default()
    };
    let b = Snapshot {
        pools: vec![pool("master", Some("3")), pool("worker", Some("7"))],
        ..Snapshot::default()
    };
    assert_eq!(a.versions(), b.versions());
    assert!(a.versions().is_some());
    let changed = Snapshot {
        pools: vec![pool("master", Some("3")), pool("worker", Some("8"))],
        ..Snapshot::default()
    };
    assert_ne!(a.versions(), changed.versions());
    let gone = Snapshot {
        pools: vec![pool("worker", Some("7"))],
        ..Snapshot::default()
    };
    assert_ne!(a.versions(), gone.versions());
    let other_release = a.clone().with_release_override(Some("4.23.0"));
    assert_ne!(a.versions(), other_release.versions());
    let unversioned = Snapshot {
        pools: vec![pool("worker", None)],
        ..Snapshot::default()
    };
    assert_eq!(unversioned.versions(), None);
}
