//! The pool rule: a pool MCO has not finished rolling out blocks between and before its nodes.

use serde_json::{Value, json};

use super::*;

/// `Cluster::report()` between two nodes of the rollout: the first node reached the image, the
/// next one is not targeted yet, and pool `worker` reports `Updating` (or not, or is paused).
pub(super) fn between_batches(updating: bool, paused: bool) -> Snapshot {
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
            next_nodes: vec!["worker-b".into()],
            updated_machines: Some(1),
            machines: Some(2),
        }]
    );
    let msg = message::denial(&v);
    assert!(
        msg.starts_with("machineosconfig \"worker\" cannot be deleted yet: pool worker is still rolling out an image built from it."),
        "{msg}"
    );
    assert!(msg.contains("pool worker is rolling out .../ocb-image@sha256:01971adebd63... (pool status: 1 of 2 machines updated): 1 node does not run it yet: worker-b; MCO updates it next"), "{msg}");
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
            .contains("Wait until those nodes report state Done on that image (`oc get mcp worker` shows the pool's progress), then delete again, or override with:"),
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
pub(super) fn updating_with(nodes: Vec<Value>) -> Snapshot {
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
            "the same image spelled with a tag and upper-case hex has not reached it",
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
            false,
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
