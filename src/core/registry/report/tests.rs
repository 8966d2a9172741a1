use std::sync::Arc;

use super::*;

fn checked(image: &str, holders: Vec<Holder>, status: Status) -> CheckedImage {
    CheckedImage {
        needed: NeededImage {
            image: image.into(),
            needed_by: holders,
        },
        verdict: Answer {
            status,
            why: "because".into(),
        },
        places: vec![(
            image.into(),
            Answer {
                status,
                why: "because".into(),
            },
        )],
    }
}

fn node(name: &str, need: Need) -> Holder {
    Holder::Node {
        node: Arc::from(name),
        pool: Some(Arc::from("worker")),
        need,
    }
}

#[test]
fn old_builds_do_not_fail_the_run() {
    let build = || Holder::MachineOSBuild { name: "b".into() };
    let ok = vec![
        checked("a", vec![node("w1", Need::Running)], Status::Available),
        checked("old", vec![build()], Status::Missing),
    ];
    assert!(passes(&ok));
    let unknown = vec![checked(
        "a",
        vec![node("w1", Need::Pending)],
        Status::Unknown,
    )];
    assert!(!passes(&unknown));
    let config = vec![checked(
        "c",
        vec![Holder::MachineOSConfig {
            name: "worker".into(),
            pool: "worker".into(),
            need: Need::Running,
        }],
        Status::Missing,
    )];
    assert!(!passes(&config));
}

#[test]
fn json_has_the_fields_the_issue_names() {
    let images = vec![checked(
        "quay.example/x@sha256:00",
        vec![node("w1", Need::Pending)],
        Status::Missing,
    )];
    let v = json(&images, &[]);
    let first = &v["images"][0];
    assert_eq!(first["image"], "quay.example/x@sha256:00");
    assert_eq!(first["status"], "missing");
    assert_eq!(first["why"], "because");
    assert_eq!(first["neededBy"][0]["node"], "w1");
    assert_eq!(first["neededBy"][0]["need"], "pending");
    assert_eq!(first["places"][0]["status"], "missing");
}

#[test]
fn words_for_an_image_already_gone() {
    let served = ProtectedImage {
        image: format!(
            "quay.example/ocb/os@sha256:{}",
            "0123456789abcdef".repeat(4)
        ),
        status: Status::Missing,
        why: "MANIFEST_UNKNOWN".into(),
    };
    let words = already_missing(&served);
    assert!(words.contains(".../os@sha256:0123456789ab..."), "{words}");
    assert!(words.contains("already gone") && words.contains("MANIFEST_UNKNOWN"));
}

#[test]
fn counts_per_pool() {
    let a = NeededImage {
        image: "a".into(),
        needed_by: vec![node("w1", Need::Pending), node("w2", Need::Running)],
    };
    let b = NeededImage {
        image: "b".into(),
        needed_by: vec![node("w3", Need::Running)],
    };
    let counts = pool_counts(
        ["worker", "infra"],
        [(&a, Status::Missing), (&b, Status::Unknown)],
    );
    let get = |pool: &str, need, status| counts[&(pool.to_string(), need, status)];
    assert_eq!(get("worker", Need::Pending, Status::Missing), 1);
    assert_eq!(get("worker", Need::Running, Status::Missing), 0);
    assert_eq!(get("worker", Need::Running, Status::Unknown), 1);
    assert_eq!(get("infra", Need::Pending, Status::Missing), 0);
    assert_eq!(counts.len(), 8);
}

#[test]
fn text_names_who_needs_it() {
    let holders = (0..5)
        .map(|i| node(&format!("w{i}"), Need::Pending))
        .collect();
    let t = text(&[checked("a", holders, Status::Missing)]);
    assert!(t.contains("MISSING"), "{t}");
    assert!(t.contains("w0, w1, w2 (+2)"), "{t}");
}
