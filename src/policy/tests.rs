//! Table-driven tests of the policy over small hand-built clusters.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::message;
use crate::model::{LABEL_MACHINE_OS_CONFIG, OVERRIDE_ANNOTATION, node_annotations};

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";
const NEW: &str = "01971adebd63aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OLD: &str = "0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const INFRA: &str = "0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const NODE: &str = "ip-10-0-11-240.us-east-2.compute.internal";

fn img(hex: &str) -> String {
    format!("{REPO}@sha256:{hex}")
}

fn mosc(name: &str, current: Option<&str>) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"machineConfigPool": {"name": name}, "renderedImagePushSpec": format!("{REPO}:latest")},
        "status": {"currentImagePullSpec": current.map(img), "machineOSBuild": current.map(|_| json!({"name": format!("{name}-{}", &NEW[..6])}))}
    })
}

/// A config that built before (MCO's current-build annotation) but has no builds left.
fn mosc_builds_gone(name: &str) -> Value {
    let mut v = mosc(name, None);
    v["metadata"]["annotations"] = json!({"machineconfiguration.openshift.io/current-machine-os-build": format!("{name}-old")});
    v
}

fn mosb(name: &str, mosc: &str, hex: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {LABEL_MACHINE_OS_CONFIG: mosc}},
        "spec": {"machineOSConfig": {"name": mosc}},
        "status": {"digestedImagePushSpec": img(hex)}
    })
}

fn pool(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}}})
}

/// A node with the given roles and (desired, current, state) annotations.
fn node(
    name: &str,
    roles: &[&str],
    desired: Option<&str>,
    current: Option<&str>,
    state: &str,
) -> Value {
    let labels: serde_json::Map<String, Value> = roles
        .iter()
        .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
        .collect();
    let mut ann = serde_json::Map::new();
    ann.insert(node_annotations::STATE.into(), json!(state));
    if let Some(d) = desired {
        ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = current {
        ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    json!({"metadata": {"name": name, "labels": labels, "annotations": ann}})
}

fn arcs<T: serde::de::DeserializeOwned>(items: &[Value]) -> Vec<Arc<T>> {
    items
        .iter()
        .map(|v| Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes")))
        .collect()
}

struct Cluster {
    moscs: Vec<Value>,
    mosbs: Vec<Value>,
    nodes: Vec<Value>,
}

impl Cluster {
    /// The report's scenario: worker MOSC built, first node rolling to the new image.
    fn report() -> Cluster {
        Cluster {
            moscs: vec![mosc("worker", Some(NEW))],
            mosbs: vec![mosb("worker-8f2a1c", "worker", NEW)],
            nodes: vec![
                node(NODE, &["worker"], Some(&img(NEW)), None, "Working"),
                node("worker-b", &["worker"], None, None, "Done"),
            ],
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: arcs(&self.moscs),
            machine_os_builds: arcs(&self.mosbs),
            pools: arcs(&[pool("worker"), pool("infra")]),
            nodes: arcs(&self.nodes),
        }
    }
}

fn decide(c: &Cluster, target: &str, mode: PolicyMode) -> Verdict {
    let snap = c.snapshot();
    if let Some(mosb) = snap.machine_os_build(target) {
        return evaluate(&snap, Deletion::MachineOSBuild(mosb), mode);
    }
    let mosc = snap.machine_os_config(target).expect("target in fixture");
    evaluate(&snap, Deletion::MachineOSConfig(mosc), mode)
}

fn blocking_names(v: &Verdict) -> Vec<&str> {
    v.blocking.iter().map(|b| b.node.as_str()).collect()
}

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
            "builds already gone: repository fallback",
            Cluster {
                moscs: vec![mosc_builds_gone("worker")],
                mosbs: vec![],
                ..Cluster::report()
            },
            "worker",
            InFlight,
            vec![NODE],
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
            "current image spelled differently still counts as reached",
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
            vec![],
            vec![],
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

#[test]
fn repository_fallback_matches_any_image_of_the_repository() {
    let c = Cluster {
        moscs: vec![mosc_builds_gone("worker")],
        mosbs: vec![],
        nodes: vec![
            node("a", &["worker"], Some(&img(INFRA)), None, "Working"),
            node(
                "b",
                &["worker"],
                Some(&format!("quay.io/other/ocb-image@sha256:{INFRA}")),
                None,
                "Working",
            ),
        ],
    };
    let v = decide(&c, "worker", PolicyMode::InFlight);
    assert_eq!(blocking_names(&v), vec!["a"]);
    assert_eq!(v.blocking[0].machine_os_build, None);
    assert!(
        v.repository_fallback
            .as_deref()
            .is_some_and(|r| r.ends_with("/ocb-image"))
    );
}

#[test]
fn override_allows_and_keeps_the_reasons() {
    let mut c = Cluster::report();
    c.moscs[0]["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: "node is being replaced"});
    let v = decide(&c, "worker", PolicyMode::InFlight);
    assert!(v.allowed && v.overridden());
    assert_eq!(blocking_names(&v), vec![NODE]);
    let warnings = message::override_warnings(&v);
    assert!(
        warnings[0].contains("node is being replaced"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains(NODE), "{warnings:?}");
    assert!(
        warnings.last().is_some_and(|w| w.contains("oc annotate machineosbuild -l machineconfiguration.openshift.io/machine-os-config=worker")),
        "{warnings:?}"
    );
    assert!(warnings.iter().all(|w| w.len() <= 256));

    // An override on a deletion that is safe anyway produces no warnings.
    let mut settled = Cluster::report();
    settled.nodes.truncate(0);
    settled.moscs[0]["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: "x"});
    let v = decide(&settled, "worker", PolicyMode::InFlight);
    assert!(v.allowed && !v.overridden());
    assert!(message::override_warnings(&v).is_empty());
}

#[test]
fn denial_message_is_actionable() {
    let v = decide(&Cluster::report(), "worker", PolicyMode::InFlight);
    let msg = message::denial(&v);
    let want = format!(
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.\n  \
         {NODE} (pool worker, state Working): desired .../ocb-image@sha256:01971adebd63..., current <none>\n  \
         pool worker is rolling out .../ocb-image@sha256:01971adebd63...: 2 nodes do not run it yet; MCO updates them one after another\n\
         Deleting it now removes that image from the registry and the node fails \"manifest unknown\" (the pool goes Degraded).\n\
         Wait until `oc get mcp worker` shows UPDATED=True with every machine updated, then delete again; \
         or stop the rollout first (`oc patch mcp worker --type merge -p '{{\"spec\":{{\"paused\":true}}}}'`) \
         and delete once the nodes already updating are done; or override with:\n  \
         oc annotate machineosconfig worker mosc-guard.dev/allow-deletion=\"<reason>\""
    );
    assert_eq!(msg, want);
}

#[test]
fn denial_lists_five_nodes_then_counts_the_rest() {
    let mut c = Cluster::report();
    c.nodes = (0..8)
        .map(|i| {
            node(
                &format!("n{i}"),
                &["worker"],
                Some(&img(NEW)),
                None,
                "Working",
            )
        })
        .collect();
    let msg = message::denial(&decide(&c, "worker", PolicyMode::InFlight));
    assert!(
        msg.contains("8 nodes still need an image built from it"),
        "{msg}"
    );
    assert!(
        msg.contains("  n4 (pool worker") && !msg.contains("  n5 (pool"),
        "{msg}"
    );
    assert!(msg.contains("  and 3 more\n"), "{msg}");
    assert!(
        msg.contains("removes those images from the registry and the nodes fail"),
        "{msg}"
    );
}

#[test]
fn in_use_denial_explains_the_strict_mode() {
    let mut c = Cluster::report();
    c.nodes = vec![node(
        NODE,
        &["worker"],
        Some(&img(NEW)),
        Some(&img(NEW)),
        "Done",
    )];
    let v = decide(&c, "worker-8f2a1c", PolicyMode::InUse);
    let msg = message::denial(&v);
    assert!(msg.starts_with("machineosbuild \"worker-8f2a1c\" cannot be deleted yet: 1 node still needs or runs its image (policy in-use)."), "{msg}");
    assert!(
        msg.contains("runs .../ocb-image@sha256:01971adebd63..."),
        "{msg}"
    );
    assert!(
        msg.contains("Policy in-use blocks while any node runs"),
        "{msg}"
    );
    assert!(
        msg.ends_with(
            "oc annotate machineosbuild worker-8f2a1c mosc-guard.dev/allow-deletion=\"<reason>\""
        ),
        "{msg}"
    );
}

#[test]
fn build_without_an_image_yet_guards_nothing() {
    let mut c = Cluster::report();
    c.mosbs = vec![
        json!({"metadata": {"name": "worker-new"}, "spec": {"machineOSConfig": {"name": "worker"}}}),
    ];
    let v = decide(&c, "worker-new", PolicyMode::InUse);
    assert!(v.allowed && v.images.is_empty());
}

#[test]
fn denial_without_a_known_pool_says_what_to_wait_for() {
    let mut c = Cluster::report();
    c.nodes = vec![node("loose", &["edge"], Some(&img(NEW)), None, "Working")];
    let msg = message::denial(&decide(&c, "worker", PolicyMode::InFlight));
    assert!(msg.contains("loose (pool <none>, state Working)"), "{msg}");
    assert!(
        msg.contains("Wait until those nodes report state Done on that image"),
        "{msg}"
    );
    assert!(!msg.contains("oc get mcp"), "{msg}");
}

/// `Cluster::report()` between two nodes of the rollout: the first node reached the image, the
/// next one is not targeted yet, and pool `worker` reports `Updating` (or not, or is paused).
fn between_batches(updating: bool, paused: bool) -> Snapshot {
    let c = Cluster {
        nodes: vec![
            node(NODE, &["worker"], Some(&img(NEW)), Some(&img(NEW)), "Done"),
            node("worker-b", &["worker"], None, None, "Done"),
        ],
        ..Cluster::report()
    };
    let mut snap = c.snapshot();
    let mut worker = pool("worker");
    worker["spec"]["paused"] = json!(paused);
    worker["status"] = json!({
        "machineCount": 2,
        "updatedMachineCount": 1,
        "conditions": [
            {"type": "Updated", "status": if updating { "False" } else { "True" }},
            {"type": "Updating", "status": if updating { "True" } else { "False" }}
        ]
    });
    snap.pools = arcs(&[worker, pool("infra")]);
    snap
}

#[test]
fn a_pool_still_rolling_out_the_image_blocks_between_two_nodes() {
    let snap = between_batches(true, false);
    let mosc = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert!(!v.allowed && v.blocking.is_empty(), "{v:?}");
    assert_eq!(
        v.rolling,
        vec![RollingPool {
            pool: "worker".into(),
            image: img(NEW),
            pending_nodes: Some(1),
            updated_machines: Some(1),
            machines: Some(2),
        }]
    );
    let msg = message::denial(&v);
    assert!(
        msg.starts_with("machineosconfig \"worker\" cannot be deleted yet: pool worker is still rolling out an image built from it."),
        "{msg}"
    );
    assert!(msg.contains("pool worker is rolling out .../ocb-image@sha256:01971adebd63...: 1 node does not run it yet (pool status: 1 of 2 machines updated); MCO updates it next"), "{msg}");
    assert!(
        msg.contains("the pool's next node fails \"manifest unknown\""),
        "{msg}"
    );
    assert!(
        msg.contains(
            "Wait until `oc get mcp worker` shows UPDATED=True with every machine updated"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(r#"or stop the rollout first (`oc patch mcp worker --type merge -p '{"spec":{"paused":true}}'`)"#),
        "{msg}"
    );

    // The build being rolled out is protected the same way.
    let mosb = snap.machine_os_build("worker-8f2a1c").expect("build");
    let v = evaluate(&snap, Deletion::MachineOSBuild(mosb), PolicyMode::InFlight);
    assert!(!v.allowed && v.rolling.len() == 1, "{v:?}");
}

/// The gap the race soak found: the config already points at the new image (its build
/// succeeded), no node has been sent to it yet, and the pool still reports `Updated` from the
/// previous rollout. MCO's node controller sends the first node within seconds, still holding
/// the config in its cache, to the image the cleanup deletes.
#[test]
fn a_pool_blocks_once_its_config_points_at_the_image_before_it_reports_updating() {
    // Pool `worker` reports Updated; both of its nodes run the previous build's image.
    let mut snap = between_batches(false, false);
    let on_old = |name: &str| node(name, &["worker"], Some(&img(OLD)), Some(&img(OLD)), "Done");
    snap.nodes = arcs(&[on_old(NODE), on_old("worker-b")]);
    snap.machine_os_builds
        .push(arcs(&[mosb("worker-old", "worker", OLD)]).remove(0));
    let mosc = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert!(!v.allowed && v.blocking.is_empty(), "{v:?}");
    assert_eq!(v.rolling.len(), 1, "{v:?}");
    assert_eq!(v.rolling[0].image, img(NEW), "{v:?}");
    assert_eq!(v.rolling[0].pending_nodes, Some(2), "{v:?}");
    // The same moment between two nodes (one already on the image) blocks as well.
    let snap = between_batches(false, false);
    let mosc = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert!(!v.allowed && v.blocking.is_empty(), "{v:?}");
    assert_eq!(v.rolling[0].pending_nodes, Some(1), "{v:?}");
}

#[test]
fn a_paused_pool_or_another_image_does_not_block() {
    for updating in [false, true] {
        let snap = between_batches(updating, true);
        let mosc = snap.machine_os_config("worker").expect("worker");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        assert!(
            v.allowed && v.rolling.is_empty(),
            "paused, updating {updating}: {v:?}"
        );
    }
    // Paused, a node MCO already sent to the image still blocks by itself.
    let mut snap = between_batches(true, true);
    snap.nodes = arcs(&[node(
        NODE,
        &["worker"],
        Some(&img(NEW)),
        Some(&img(OLD)),
        "Working",
    )]);
    let config = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(
        &snap,
        Deletion::MachineOSConfig(config),
        PolicyMode::InFlight,
    );
    assert_eq!(blocking_names(&v), vec![NODE], "{v:?}");
    assert!(v.rolling.is_empty(), "{v:?}");
    assert!(
        message::denial(&v)
            .contains("Wait until `oc get mcp worker` shows UPDATED=True, then delete again, or override with:"),
        "{v:?}"
    );
    // An older build of the same config: the pool is rolling out a different image.
    let mut snap = between_batches(true, false);
    snap.machine_os_builds
        .push(arcs(&[mosb("worker-old", "worker", OLD)]).remove(0));
    let old = snap.machine_os_build("worker-old").expect("old build");
    let v = evaluate(&snap, Deletion::MachineOSBuild(old), PolicyMode::InFlight);
    assert!(v.allowed, "{v:?}");
    // The override still lets it through, as for blocking nodes.
    let mut snap = between_batches(true, false);
    let mut annotated = mosc("worker", Some(NEW));
    annotated["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: "ticket 7"});
    snap.machine_os_configs = arcs(&[annotated]);
    let target = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(
        &snap,
        Deletion::MachineOSConfig(target),
        PolicyMode::InFlight,
    );
    assert!(v.allowed && v.overridden(), "{v:?}");
    assert!(
        message::override_warnings(&v)
            .iter()
            .any(|w| w.contains("pool worker is rolling out")),
        "{v:?}"
    );
}

/// Pool `worker` reports `Updating` (a new build runs, or one failed) with these nodes.
fn updating_with(nodes: Vec<Value>) -> Snapshot {
    let c = Cluster {
        nodes,
        ..Cluster::report()
    };
    let mut snap = c.snapshot();
    let mut worker = pool("worker");
    worker["status"] = json!({
        "machineCount": 2,
        "updatedMachineCount": 0,
        "conditions": [
            {"type": "Updated", "status": "False"},
            {"type": "Updating", "status": "True",
             "message": "Pool is waiting for OS image build to complete (mosb: worker-next)"}
        ]
    });
    snap.pools = arcs(&[worker, pool("infra")]);
    snap
}

#[test]
fn an_updating_pool_blocks_only_while_one_of_its_nodes_has_not_reached_the_image() {
    let on_new =
        |name: &str, role: &str| node(name, &[role], Some(&img(NEW)), Some(&img(NEW)), "Done");
    let cases: Vec<(&str, Vec<Value>, bool)> = vec![
        (
            "a build runs (or failed): every node of the pool already runs the MOSC's image",
            vec![on_new(NODE, "worker"), on_new("worker-b", "worker")],
            true,
        ),
        (
            "a node of the pool still on the previous image: MCO targets it next",
            vec![
                on_new(NODE, "worker"),
                node(
                    "worker-b",
                    &["worker"],
                    Some(&img(OLD)),
                    Some(&img(OLD)),
                    "Done",
                ),
            ],
            false,
        ),
        (
            "a node of the pool never layered yet (first rollout)",
            vec![
                on_new(NODE, "worker"),
                node("worker-b", &["worker"], None, None, "Done"),
            ],
            false,
        ),
        (
            "a node of another pool not on the image does not count",
            vec![
                on_new(NODE, "worker"),
                node("infra-a", &["infra", "worker"], None, None, "Done"),
            ],
            true,
        ),
        (
            "the same image spelled with a tag and upper-case hex counts as reached",
            vec![
                on_new(NODE, "worker"),
                node(
                    "worker-b",
                    &["worker"],
                    Some(&img(NEW)),
                    Some(&format!("{REPO}:latest@sha256:{}", NEW.to_uppercase())),
                    "Done",
                ),
            ],
            true,
        ),
    ];
    for (what, nodes, allowed) in cases {
        let snap = updating_with(nodes);
        let mosc = snap.machine_os_config("worker").expect("worker");
        let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
        assert_eq!(v.allowed, allowed, "{what}: {v:?}");
        assert_eq!(v.rolling.is_empty(), allowed, "{what}: {v:?}");
        let build = snap.machine_os_build("worker-8f2a1c").expect("build");
        let v = evaluate(&snap, Deletion::MachineOSBuild(build), PolicyMode::InFlight);
        assert_eq!(v.allowed, allowed, "{what} (its build): {v:?}");
    }
}

#[test]
fn a_pool_with_a_guarded_target_needs_every_node_not_the_index() {
    // Pool worker (not paused) targets the config's current image: only every node can show
    // that none of the pool is left to update, settled or not, so the decision scans them all.
    for nodes in [
        vec![node(
            NODE,
            &["worker"],
            Some(&img(NEW)),
            Some(&img(NEW)),
            "Done",
        )],
        vec![node(NODE, &["worker"], Some(&img(NEW)), None, "Working")],
    ] {
        let snap = updating_with(nodes);
        let mosc = snap.machine_os_config("worker").expect("worker");
        assert_eq!(
            guarded_digests(&snap, Deletion::MachineOSConfig(mosc)),
            None
        );
    }
    // Paused, or an older build no pool targets: the index suffices.
    let paused = between_batches(false, true);
    let mosc = paused.machine_os_config("worker").expect("worker");
    assert_eq!(
        guarded_digests(&paused, Deletion::MachineOSConfig(mosc)),
        Some([NEW.to_string()].into())
    );
    let mut snap = Cluster::report().snapshot();
    snap.machine_os_builds
        .push(arcs(&[mosb("worker-old", "worker", OLD)]).remove(0));
    let old = snap.machine_os_build("worker-old").expect("old build");
    assert_eq!(
        guarded_digests(&snap, Deletion::MachineOSBuild(old)),
        Some([OLD.to_string()].into())
    );
}

/// The scan keys its memo on string identity: nodes built through one interner (as the node
/// cache builds them) share their image strings, and more distinct pairs than the memo holds
/// evict each other. The verdict must still be each node's own.
#[test]
fn shared_image_strings_and_a_full_memo_give_each_node_its_own_verdict() {
    use crate::node::{Interner, WireNode};
    let hexes: Vec<String> = (0..6).map(|i| format!("{i:x}").repeat(64)).collect();
    let mut interner = Interner::default();
    let mut nodes = Vec::new();
    let mut want = Vec::new();
    for i in 0..60 {
        let (d, c) = (&hexes[i % 6], &hexes[(i / 6) % 6]);
        let name = format!("node-{i:02}");
        let wire: WireNode = serde_json::from_value(node(
            &name,
            &["infra"],
            Some(&img(d)),
            Some(&img(c)),
            "Working",
        ))
        .expect("fixture decodes");
        nodes.push(Arc::new(NodeMeta::from_wire(
            wire.metadata,
            &mut interner,
            |_| true,
        )));
        // The config's builds are hexes 0 to 2: a node blocks while its desired image is
        // one of them and its current image differs.
        if i % 6 < 3 && d != c {
            want.push(name);
        }
    }
    let mut snap = Cluster::report().snapshot();
    snap.machine_os_builds = arcs(&[
        mosb("worker-0", "worker", &hexes[0]),
        mosb("worker-1", "worker", &hexes[1]),
        mosb("worker-2", "worker", &hexes[2]),
    ]);
    snap.machine_os_configs = arcs(&[mosc("worker", None)]);
    snap.nodes = nodes;
    let mosc = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert_eq!(blocking_names(&v), want);
    for b in &v.blocking {
        let i: usize = b.node["node-".len()..].parse().expect("index");
        assert_eq!(
            b.desired_image.as_deref(),
            Some(img(&hexes[i % 6]).as_str())
        );
    }
}

/// A denial decided from the index's candidates: the same blocking nodes as the full scan, the
/// rolling pool named without a count; nothing when no candidate blocks by itself.
#[test]
fn a_blocking_candidate_decides_a_denial_without_every_node() {
    let snap = Cluster::report().snapshot();
    let mosc = snap.machine_os_config("worker").expect("worker");
    let target = Deletion::MachineOSConfig(mosc);
    let full = evaluate(&snap, target, PolicyMode::InFlight);
    assert_eq!(
        guarded_digests(&snap, target),
        None,
        "the pool rule needs every node"
    );
    assert_eq!(
        blocking_digests(&snap, target),
        Some([NEW.to_string()].into())
    );
    // Only the rolling node carries the digest: the index names it alone.
    let mut candidates = snap.clone();
    candidates.nodes.retain(|n| n.name() == NODE);
    let v = evaluate_blocked(&candidates, target, PolicyMode::InFlight).expect("blocked");
    assert_eq!(v.blocking, full.blocking);
    assert!(!v.allowed);
    assert_eq!(full.rolling[0].pending_nodes, Some(2));
    assert_eq!(v.rolling.len(), 1);
    assert_eq!(v.rolling[0].pending_nodes, None);
    let msg = message::denial(&v);
    assert!(
        msg.contains("pool worker is rolling out .../ocb-image@sha256:01971adebd63...; MCO updates its nodes one after another"),
        "{msg}"
    );
    // Between two nodes nothing blocks by itself: only the full scan decides.
    let between = between_batches(true, false);
    let mosc = between.machine_os_config("worker").expect("worker");
    let mut candidates = between.clone();
    candidates.nodes.clear();
    assert_eq!(
        evaluate_blocked(
            &candidates,
            Deletion::MachineOSConfig(mosc),
            PolicyMode::InFlight
        ),
        None
    );
}
