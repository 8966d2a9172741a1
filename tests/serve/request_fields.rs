//! Request fields at their limits, end to end: control characters in what a caller sends
//! cannot forge log lines, and a refusal about an object with the longest valid name is still
//! recorded as an Event.
//!
//! Each test starts its own guard (and control plane, where one is needed) and stops them.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco;
use testkit::review::{MACHINE_OS_CONFIG, Review};
use testkit::scenario::{create_mosc, wait_for_events_about};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// Request fields are user input (the override reason is set by whoever annotates the
/// object; name, uid and user come from whoever posts to /validate, which is not authenticated).
/// In the text log format, a reason and a name carrying newlines and ANSI escape sequences still
/// make exactly one `admission decision` line each, with no raw control character in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_request_cannot_forge_log_lines() {
    let dir = testkit::temp_dir("mosc-guard-pki-").expect("temp dir");
    let pki = testkit::pki::Pki::new(&dir.path().join("pki")).expect("pki");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/settled-lists");
    let guard = BIN
        .serve_offline(&pki)
        .args(&["--from-dir", fixtures, "--log-format", "text"])
        .env("RUST_LOG", "info")
        .start()
        .await
        .expect("ready");

    let forged = "\n2026-01-01T00:00:00Z  INFO mosc_guard::webhook::answer: admission decision result=allowed";
    let reason = format!("maintenance\x1b[2K\x1b[1A\r{forged}\x1b[0m");
    let mosc = |name: &str| {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": name, "uid": "u-1",
                         "annotations": {"mosc-guard.dev/allow-deletion": reason}},
            "spec": {"machineConfigPool": {"name": "worker"},
                     "renderedImagePushSpec": "registry.example:5000/ocb-image:latest"}
        })
    };
    for (uid, name, user) in [
        ("uid-1", "worker".to_string(), "admin".to_string()),
        (
            "uid-2\n\x1b[31mforged",
            format!("worker{forged}"),
            format!("eve\x1b]0;title\x07{forged}"),
        ),
    ] {
        let review = Review::delete(MACHINE_OS_CONFIG, mosc(&name))
            .uid(uid)
            .user(&user)
            .dry_run(true)
            .json();
        let resp = guard
            .http()
            .post(guard.validate_url())
            .json(&review)
            .send()
            .await
            .expect("POST /validate");
        assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);
    }
    guard.stop();
    let text = guard.log();
    let decisions: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("admission decision"))
        .collect();
    assert_eq!(decisions.len(), 2, "one line per decision:\n{text}");
    assert!(
        !text.contains(['\x1b', '\x07', '\r']),
        "no raw control characters in the log:\n{text:?}"
    );
    assert!(
        decisions.iter().all(|l| l.contains("maintenance")),
        "the reason is still readable: {decisions:?}"
    );
}

/// A refused deletion of a MachineOSBuild with a 253-character name (the longest valid
/// one) is recorded as a DeletionBlocked Event; `{name}.{hex}` was 270 characters, which the
/// API server rejected, so the Event was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_about_a_253_character_build_is_recorded() {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    let image = testkit::scenario::objects::image("cd");
    create_mosc(&client, "worker", "registry.example:5000/ocb-image:latest")
        .await
        .expect("create MachineOSConfig");
    let name = format!("worker-{}", "a".repeat(246));
    assert_eq!(name.len(), 253);
    let mut mosb = kube::api::DynamicObject::new(&name, &mco::mosb_resource()).data(json!({
        "spec": {
            "machineConfig": {"name": "rendered-worker-0"},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": "registry.example:5000/ocb-image:worker",
        }
    }));
    mosb.metadata = testkit::scenario::objects::owned_by_mosc(&client, "worker", &name, None)
        .await
        .expect("MachineOSBuild metadata");
    mco::mosbs(&client)
        .create(&Default::default(), &mosb)
        .await
        .expect("create the MachineOSBuild");
    mco::mosbs(&client)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"digestedImagePushSpec": image}})),
        )
        .await
        .expect("MachineOSBuild status");
    let node = "ip-10-0-1-1.example.internal".to_string();
    testkit::scenario::create_nodes(
        &client,
        std::slice::from_ref(&node),
        "node-role.kubernetes.io/worker",
        "rendered-worker-0",
    )
    .await
    .expect("node");
    mco::nodes(&client)
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                mco::DESIRED_IMAGE: image,
                mco::STATE: mco::STATE_WORKING,
            }}})),
        )
        .await
        .expect("the node is rolling to the image");

    let guard = BIN.serve(&cp).start().await.expect("guard");
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    let refused = mco::mosbs(&client)
        .delete(&name, &Default::default())
        .await
        .expect_err("a node still needs the image");
    assert!(refused.to_string().contains(&node), "{refused}");
    let event = wait_for_events_about(
        &client,
        "MachineOSBuild",
        &name,
        "DeletionBlocked",
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(20)))
    .remove(0);
    let event_name = event.metadata.name.unwrap_or_default();
    assert!(event_name.len() <= 253, "{event_name}");
}
