//! The rules over the report's cluster and small variations of it.

use super::*;

#[test]
fn table() {
    use PolicyMode::{InFlight, InUse};
    type Case = (
        &'static str,
        Cluster,
        &'static str,
        PolicyMode,
        Vec<&'static str>,
        Vec<&'static str>,
    );
    let settled = || Cluster {
        nodes: vec![
            node(NODE, &["worker"], Some(&img(NEW)), Some(&img(NEW)), "Done"),
            node(
                "worker-b",
                &["worker"],
                Some(&img(NEW)),
                Some(&img(NEW)),
                "Done",
            ),
        ],
        ..Cluster::report()
    };
    let cases: Vec<Case> = vec![
        (
            "report scenario blocks the rolling node",
            Cluster::report(),
            "worker",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "settled pool is safe to leave",
            settled(),
            "worker",
            InFlight,
            vec![],
            vec![],
        ),
        (
            "in-use blocks a settled pool",
            settled(),
            "worker",
            InUse,
            vec![NODE, "worker-b"],
            vec![],
        ),
        (
            "a node of another pool still needing the image blocks",
            Cluster {
                nodes: vec![node(
                    "infra-a",
                    &["worker", "infra"],
                    Some(&img(NEW)),
                    Some(&img(OLD)),
                    "Working",
                )],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec!["infra-a"],
            vec![],
        ),
        (
            "builds already gone: MCO has no image left to delete",
            Cluster {
                moscs: vec![mosc_builds_gone("worker")],
                mosbs: vec![],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![],
            vec![],
        ),
        (
            "tag and digest spelling of the same image",
            Cluster {
                nodes: vec![node(
                    NODE,
                    &["worker"],
                    Some(&format!(
                        "{REPO}:worker-8f2a1c@sha256:{}",
                        NEW.to_uppercase()
                    )),
                    Some(&img(OLD)),
                    "Working",
                )],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "current image spelled differently has not reached it (MCO compares strings)",
            Cluster {
                nodes: vec![node(
                    NODE,
                    &["worker"],
                    Some(&img(NEW)),
                    Some(&format!("{REPO}:x@sha256:{NEW}")),
                    "Done",
                )],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "a Degraded node that never reached the image still needs it",
            Cluster {
                nodes: vec![node(
                    NODE,
                    &["worker"],
                    Some(&img(NEW)),
                    Some(&img(OLD)),
                    "Degraded",
                )],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "another config's pool rolling does not block this one",
            Cluster {
                moscs: vec![mosc("worker", Some(NEW)), mosc("infra", None)],
                mosbs: vec![
                    mosb("worker-8f2a1c", "worker", NEW),
                    mosb("infra-1", "infra", INFRA),
                ],
                nodes: vec![
                    node("infra-a", &["infra"], Some(&img(INFRA)), None, "Working"),
                    node(NODE, &["worker"], Some(&img(NEW)), Some(&img(NEW)), "Done"),
                ],
            },
            "worker",
            InFlight,
            vec![],
            vec![],
        ),
        (
            "older build of the same config still being rolled blocks",
            Cluster {
                mosbs: vec![
                    mosb("worker-8f2a1c", "worker", NEW),
                    mosb("worker-old", "worker", OLD),
                ],
                nodes: vec![node(NODE, &["worker"], Some(&img(OLD)), None, "Working")],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "deleting the build being rolled blocks",
            Cluster::report(),
            "worker-8f2a1c",
            InFlight,
            vec![NODE],
            vec!["worker"],
        ),
        (
            "deleting an unrelated build of the same config is allowed",
            Cluster {
                mosbs: vec![
                    mosb("worker-8f2a1c", "worker", NEW),
                    mosb("worker-old", "worker", OLD),
                ],
                ..Cluster::report()
            },
            "worker-old",
            InFlight,
            vec![],
            vec![],
        ),
        (
            "a config that never built guards nothing, not even its repository",
            Cluster {
                moscs: vec![mosc("worker", Some(NEW)), mosc("infra", None)],
                ..Cluster::report()
            },
            "infra",
            InUse,
            vec![],
            vec![],
        ),
        (
            "a non-layered node blocks nothing itself, but its pool has yet to roll it",
            Cluster {
                nodes: vec![node(NODE, &["worker"], None, None, "Done")],
                ..Cluster::report()
            },
            "worker",
            InUse,
            vec![],
            vec!["worker"],
        ),
    ];
    for (name, cluster, target, mode, want, rolling) in cases {
        let v = decide(&cluster, target, mode);
        assert_eq!(blocking_names(&v), want, "{name}");
        let pools: Vec<&str> = v.rolling.iter().map(|p| p.pool.as_str()).collect();
        assert_eq!(pools, rolling, "{name}");
        assert_eq!(v.allowed, want.is_empty() && rolling.is_empty(), "{name}");
        assert_eq!(v.mode, mode, "{name}");
    }
}

#[test]
fn reasons_name_node_pool_images_and_build() {
    let v = decide(&Cluster::report(), "worker", PolicyMode::InFlight);
    assert_eq!(
        v.blocking,
        vec![BlockingNode {
            node: NODE.into(),
            pool: Some("worker".into()),
            current_image: None,
            desired_image: Some(img(NEW)),
            state: Some("Working".into()),
            image: img(NEW),
            machine_os_build: Some("worker-8f2a1c".into()),
            reason: BlockReason::InFlight,
        }]
    );
    assert_eq!(
        v.images.len(),
        1,
        "build image and MOSC current image are one image"
    );
    assert_eq!(v.kind, TargetKind::MachineOSConfig);
}

#[test]
fn custom_pool_wins_over_worker() {
    let c = Cluster {
        nodes: vec![node(
            "infra-a",
            &["worker", "infra"],
            Some(&img(NEW)),
            None,
            "Working",
        )],
        ..Cluster::report()
    };
    let v = decide(&c, "worker", PolicyMode::InFlight);
    assert_eq!(v.blocking[0].pool.as_deref(), Some("infra"));
}
