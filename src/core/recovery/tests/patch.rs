//! The cancelling patch: what it tests, what it changes (and never changes), and its `oc` command.

use super::*;

fn pointer(key: &str) -> String {
    format!("/metadata/annotations/{}", key.replace('/', "~1"))
}

#[test]
fn tests_what_was_read_then_cancels_the_target_and_records_it() {
    let c = Cluster::report();
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    let marker = Marker::for_node(&c.snapshot().nodes[0]).encode();
    let drain = format!("drain-{NEW_CONFIG}");
    let want = json!([
        {"op": "test", "path": pointer(STATE), "value": "Degraded"},
        {"op": "test", "path": pointer(DESIRED_IMAGE), "value": img(LOST)},
        {"op": "test", "path": pointer(CURRENT_IMAGE), "value": img(RAN)},
        {"op": "test", "path": pointer(DESIRED_CONFIG), "value": NEW_CONFIG},
        {"op": "test", "path": pointer(CURRENT_CONFIG), "value": OLD_CONFIG},
        {"op": "test", "path": pointer(DESIRED_DRAIN), "value": drain},
        {"op": "test", "path": pointer(LAST_APPLIED_DRAIN), "value": drain},
        {"op": "test", "path": "/spec/unschedulable", "value": true},
        {"op": "replace", "path": pointer(DESIRED_IMAGE), "value": img(RAN)},
        {"op": "replace", "path": pointer(DESIRED_CONFIG), "value": OLD_CONFIG},
        {"op": "add", "path": "/metadata/annotations/mosc-guard.dev~1recovery", "value": marker},
    ]);
    assert_eq!(Value::Array(r.patch.ops.clone()), want);

    let after = patched(&c.nodes[0], &r.patch).expect("applies to what was read");
    let ann = &after["metadata"]["annotations"];
    assert_eq!(ann[DESIRED_IMAGE], json!(img(RAN)));
    assert_eq!(ann[DESIRED_CONFIG], json!(OLD_CONFIG));
    // What the daemon and the drain controller own is left as it was; nothing uncordons.
    let before = &c.nodes[0]["metadata"]["annotations"];
    for key in [
        STATE,
        REASON,
        CURRENT_IMAGE,
        CURRENT_CONFIG,
        DESIRED_DRAIN,
        LAST_APPLIED_DRAIN,
    ] {
        assert_eq!(ann[key], before[key], "{key}");
    }
    assert_eq!(after["spec"]["unschedulable"], json!(true));
    let recorded: Marker =
        serde_json::from_str(ann[MARKER].as_str().expect("marker")).expect("marker parses");
    assert_eq!(recorded.annotations[DESIRED_IMAGE], img(LOST));
    assert_eq!(recorded.annotations[REASON], REASON_TEXT);
    assert_eq!(recorded.boot_id.as_deref(), Some(BOOT));
    assert!(
        !recorded
            .annotations
            .contains_key("k8s.ovn.org/node-subnets"),
        "only MCO's annotations are recorded"
    );
}

#[test]
fn a_node_without_current_image_loses_desired_image_never_gets_an_empty_one() {
    let mut c = Cluster::report();
    annotate(&mut c.nodes[0], CURRENT_IMAGE, None);
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    assert!(
        r.patch
            .ops
            .contains(&json!({"op": "remove", "path": pointer(DESIRED_IMAGE)})),
        "{:#?}",
        r.patch.ops
    );
    assert!(
        !r.patch.to_json().contains(r#""value":"""#),
        "{}",
        r.patch.to_json()
    );
    let after = patched(&c.nodes[0], &r.patch).expect("applies");
    assert!(
        after["metadata"]["annotations"]
            .get(DESIRED_IMAGE)
            .is_none()
    );
}

#[test]
fn a_single_node_patch_does_not_test_the_cordon() {
    let mut c = Cluster::report();
    annotate(
        &mut c.nodes[0],
        CONTROL_PLANE_TOPOLOGY,
        Some("SingleReplica"),
    );
    c.nodes[0]["spec"] = json!({});
    let plan = c.plan(None);
    let r = recovery(&plan.nodes[0].diagnosis);
    assert!(!r.patch.to_json().contains("/spec/unschedulable"));
    patched(&c.nodes[0], &r.patch).expect("applies to a schedulable single node");
}

#[test]
fn the_patch_fails_if_anything_it_read_moved() {
    let c = Cluster::report();
    let plan = c.plan(None);
    let patch = &recovery(&plan.nodes[0].diagnosis).patch;
    type Move = (&'static str, fn(&mut Value));
    let moves: &[Move] = &[
        ("the daemon reports Done", |n| {
            annotate(n, STATE, Some("Done"))
        }),
        ("a new desired image", |n| {
            annotate(n, DESIRED_IMAGE, Some(&img(RAN)))
        }),
        ("the update completed", |n| {
            annotate(n, CURRENT_IMAGE, Some(&img(LOST)))
        }),
        ("a new desired config", |n| {
            annotate(n, DESIRED_CONFIG, Some("rendered-worker-x"))
        }),
        ("a new current config", |n| {
            annotate(n, CURRENT_CONFIG, Some("rendered-worker-x"))
        }),
        ("uncordon asked", |n| {
            annotate(n, DESIRED_DRAIN, Some(&format!("uncordon-{NEW_CONFIG}")))
        }),
        ("uncordon applied", |n| {
            annotate(
                n,
                LAST_APPLIED_DRAIN,
                Some(&format!("uncordon-{NEW_CONFIG}")),
            )
        }),
        ("uncordoned", |n| n["spec"]["unschedulable"] = json!(false)),
        ("desiredImage removed", |n| annotate(n, DESIRED_IMAGE, None)),
    ];
    for (what, edit) in moves {
        let mut node = c.nodes[0].clone();
        edit(&mut node);
        assert!(
            patched(&node, patch).is_err(),
            "{what}: the patch must fail"
        );
    }
}

#[test]
fn the_command_is_the_patch_shell_quoted_whatever_the_name_holds() {
    let c = Cluster::report();
    let plan = c.plan(None);
    let patch = &recovery(&plan.nodes[0].diagnosis).patch;
    for name in [NODE, "it's a node; rm -rf / $(x) `y` \"z\""] {
        let command = patch.command(name);
        let args = command.strip_prefix("oc ").expect("starts with oc");
        // The shell's own reading of the command is the test: each argument comes back whole.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {args}"))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{command}");
        let got: Vec<String> = String::from_utf8(out.stdout)
            .expect("utf-8")
            .split_terminator('\0')
            .map(str::to_string)
            .collect();
        let json = patch.to_json();
        assert_eq!(
            got,
            ["patch", "node", name, "--type=json", "-p", json.as_str()],
            "{command}"
        );
    }
}
