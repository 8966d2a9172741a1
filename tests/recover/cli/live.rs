//! `recover` against a real kube-apiserver: the plan from a live cluster writes nothing; `--apply`
//! records, patches once and waits, stops where it must (nobody completes the update; the node
//! moved between the read and the patch; another node changed since the plan; Ctrl-C), and a
//! re-run patches nothing twice. The objects are written as MCO leaves them after the bug; where a test
//! needs the daemon's no-op update, it writes what the daemon and the drain controller would
//! (the simulated daemon that does it by itself is the harness's: tests/recover/pool).
//!
//! This control plane plays no OpenShift cluster MCO manages: it has no ControllerConfig, so
//! `recover` cannot ask the registry whether an image is gone, and every answer is unknown,
//! which needs a person ([`a_cluster_without_a_controller_config_cannot_verify_the_loss`]).
//! The other tests are about `--apply`'s mechanics and run as an admin who verified the loss
//! ([`VERIFIED`]); what the registry answers is tests/recover/pool's (`registry.rs`), where the
//! harness's registry is reached as nodes reach it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use testkit::cli::CliRun;
use testkit::controlplane::ControlPlane;
use testkit::scenario::{create_pool, create_rendered_config, rendered_config};

use super::interpose;
use super::*;

pub(super) const OLD: &str = "rendered-worker-0c8b7d5e3f1a9c2b4d6e8f0a1b3c5d7e";
pub(super) const RAN: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const BOOT: &str = "7a7be697-054b-57ef-9d68-f80d9adc036c";
const REASON_TEXT: &str = "Failed to update OS to image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63... after retries: timed out waiting for the condition";
pub(super) const A: &str = "worker-a";
pub(super) const B: &str = "worker-b";

pub(super) fn key(short: &str) -> String {
    format!("machineconfiguration.openshift.io/{short}")
}

/// A control plane holding the worker and master pools, their rendered MachineConfigs, and
/// `names` stuck as the bug leaves a node: Degraded on a lost image, drained and cordoned for
/// the pool's new config.
pub(super) async fn stuck_cluster(names: &[&str]) -> ControlPlane {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    for (pool, role) in [
        ("worker", "node-role.kubernetes.io/worker"),
        ("master", "node-role.kubernetes.io/master"),
    ] {
        create_pool(&client, pool, role, 1).await.expect("pool");
    }
    // The pools' rendered configs exist (create_pool makes them); the one the nodes ran too.
    create_rendered_config(&client, "worker", OLD)
        .await
        .expect("MachineConfig");
    for name in names {
        create_stuck(&client, name).await;
    }
    cp
}

async fn create_stuck(client: &kube::Client, name: &str) {
    let new = rendered_config("worker");
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
            "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name},
            "annotations": {
                key("state"): "Degraded", key("reason"): REASON_TEXT,
                key("desiredImage"): LOST_IMAGE, key("currentImage"): RAN,
                key("desiredConfig"): new, key("currentConfig"): OLD,
                key("desiredDrain"): format!("drain-{new}"),
                key("lastAppliedDrain"): format!("drain-{new}"),
                key("controlPlaneTopology"): "HighlyAvailable"}},
        "spec": {"unschedulable": true}
    }))
    .expect("node");
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nodeInfo": {"bootID": BOOT}}})),
        )
        .await
        .expect("boot ID");
}

/// The admin's word that the loss is verified: the registry cannot be asked here.
pub(super) const VERIFIED: &str = "--image-loss-verified";

/// `mosc-guard recover ARGS --image-loss-verified --kubeconfig <admin>`, started off the
/// runtime's threads (the test's background tasks and the interposing webhook keep running
/// meanwhile).
pub(super) fn spawn_recover(cp: &ControlPlane, args: &[&str]) -> tokio::task::JoinHandle<CliRun> {
    let mut all = vec!["recover".to_string(), VERIFIED.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    tokio::spawn(BIN.cli().args(&all).kubeconfig(cp.kubeconfig()).run_async())
}

pub(super) async fn recover(cp: &ControlPlane, args: &[&str]) -> CliRun {
    spawn_recover(cp, args).await.expect("CLI run")
}

pub(super) async fn node(cp: &ControlPlane, name: &str) -> Node {
    Api::<Node>::all(cp.client())
        .get(name)
        .await
        .expect("get node")
}

pub(super) fn annotation(node: &Node, key: &str) -> Option<String> {
    node.metadata.annotations.as_ref()?.get(key).cloned()
}

fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// The Events `recover --apply` recorded about `name`.
pub(super) async fn recovery_events(cp: &ControlPlane, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(cp.client(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("LostImageTargetCancelled")
        })
        .collect()
}

pub(super) async fn merge(cp: &ControlPlane, name: &str, patch: Value) {
    Api::<Node>::all(cp.client())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch node");
}

/// What the daemon's no-op update and the drain controller write after a cancel to `OLD`.
pub(super) async fn complete_no_op_update(cp: &ControlPlane, name: &str) {
    let uncordon = format!("uncordon-{OLD}");
    merge(
        cp,
        name,
        json!({"metadata": {"annotations": {key("desiredDrain"): uncordon}}}),
    )
    .await;
    merge(
        cp,
        name,
        json!({"spec": {"unschedulable": null},
            "metadata": {"annotations": {key("lastAppliedDrain"): uncordon}}}),
    )
    .await;
    merge(
        cp,
        name,
        json!({"metadata": {"annotations": {key("state"): "Done", key("reason"): null}}}),
    )
    .await;
}

pub(super) async fn wait_cancelled(cp: &ControlPlane, name: &str) {
    let api: Api<Node> = Api::all(cp.client());
    testkit::poll::wait_for(
        || {
            let api = api.clone();
            async move {
                let n = api.get(name).await?;
                Ok(annotation(&n, MARKER).map(|_| ()))
            }
        },
        Duration::from_secs(60),
        "the node carries the recovery marker",
    )
    .await
    .expect("cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_a_controller_config_cannot_verify_the_loss() {
    let cp = stuck_cluster(&[A]).await;
    let before = node(&cp, A).await.metadata.resource_version;
    let unverified = |args: &[&str]| {
        let mut all = vec!["recover"];
        all.extend_from_slice(args);
        BIN.cli().args(all).kubeconfig(cp.kubeconfig()).run()
    };
    let run = unverified(&["-o", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(nodes_in(&report, "needsAttention"), [A]);
    let attention = &report["needsAttention"][0];
    assert_eq!(attention["problems"], json!(["imageLossUnverified"]));
    assert_eq!(attention["registry"]["status"], "unknown", "{report:#}");
    let no_config = "the cluster has no ControllerConfig/machine-config-controller";
    let says = |v: &Value| v.as_str().is_some_and(|w| w.contains(no_config));
    assert!(says(&attention["registry"]["why"]), "{report:#}");
    let warnings = report["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(says), "{report:#}");
    assert!(run.stderr.contains(no_config), "{run:?}");
    assert!(
        attention["do"][0]
            .as_str()
            .is_some_and(|d| d.contains("--image-loss-verified")),
        "{report:#}"
    );
    // --apply writes nothing either.
    let apply = unverified(&["--apply", "--timeout", "2s", "-o", "json"]);
    assert_eq!(apply.code, Some(1), "{apply:?}");
    assert_eq!(apply.json()["applied"], json!([]), "{apply:?}");
    assert_eq!(node(&cp, A).await.metadata.resource_version, before);
    assert!(recovery_events(&cp, A).await.is_empty());

    // The admin's word: recoverable, and the plan says the registry did not verify it.
    let run = recover(&cp, &["-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(nodes_in(&report, "recoverable"), [A]);
    assert_eq!(report["recoverable"][0]["registry"]["status"], "unknown");
    assert!(
        report["recoverable"][0]["why"]
            .to_string()
            .contains("the loss was not verified by the registry"),
        "{report:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_from_a_live_cluster_writes_nothing() {
    let cp = stuck_cluster(&[A]).await;
    let before = node(&cp, A).await.metadata.resource_version;
    let run = recover(&cp, &["-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(nodes_in(&report, "recoverable"), [A]);
    assert_eq!(report["recoverable"][0]["bootID"], BOOT);
    assert_eq!(report["recoverable"][0]["pool"], "worker");
    let text = recover(&cp, &["worker"]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout
            .contains(&format!("RECOVERABLE node {A} (pool worker)")),
        "{text:?}"
    );
    assert_eq!(
        node(&cp, A).await.metadata.resource_version,
        before,
        "nothing written"
    );
    assert!(recovery_events(&cp, A).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_records_patches_once_waits_and_stops_at_its_timeout_and_a_rerun_takes_over() {
    let cp = stuck_cluster(&[A]).await;
    let run = recover(&cp, &["--apply", "--timeout", "4s", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "nobody completes the update: {run:?}");
    let report = run.json();
    let applied = &report["applied"][0];
    assert_eq!(applied["node"], A);
    assert_eq!(applied["outcome"], "stopped", "{report:#}");
    assert_eq!(applied["problem"], "timedOut");
    assert_eq!(report["needsAttention"][0]["problems"], json!(["timedOut"]));
    assert_eq!(applied["recorded"][key("desiredImage")], LOST_IMAGE);
    for line in [
        "still recoverable",
        "recorded Event default/",
        "patching with the plan's patch",
        "waiting for its daemon",
    ] {
        assert!(run.stderr.contains(line), "progress line {line:?}: {run:?}");
    }
    // Every progress line timed; besides them only the warnings about the source (here: the
    // registry cannot be asked, this cluster has no ControllerConfig).
    assert!(
        run.stderr
            .lines()
            .all(|l| l.starts_with("[") || l.starts_with("warning: ")),
        "every line timed: {run:?}"
    );

    // The patch cancelled the target and nothing else: state, reason, the drain annotations
    // and the cordon are the daemon's and the drain controller's.
    let n = node(&cp, A).await;
    assert_eq!(annotation(&n, &key("desiredImage")).as_deref(), Some(RAN));
    assert_eq!(annotation(&n, &key("desiredConfig")).as_deref(), Some(OLD));
    assert_eq!(annotation(&n, &key("state")).as_deref(), Some("Degraded"));
    assert_eq!(annotation(&n, &key("reason")).as_deref(), Some(REASON_TEXT));
    let drain = format!("drain-{}", rendered_config("worker"));
    assert_eq!(annotation(&n, &key("desiredDrain")), Some(drain.clone()));
    assert_eq!(annotation(&n, &key("lastAppliedDrain")), Some(drain));
    assert!(cordoned(&n), "never uncordoned by the tool");
    let marker: Value =
        serde_json::from_str(&annotation(&n, MARKER).expect("marker")).expect("marker JSON");
    assert_eq!(marker["annotations"][key("desiredImage")], LOST_IMAGE);
    assert_eq!(marker["bootID"], BOOT);
    let events = recovery_events(&cp, A).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].involved_object.kind.as_deref(), Some("Node"));
    assert!(
        events[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("about to cancel the failed target")),
        "{:?}",
        events[0].message
    );

    // A re-run sees the node as cancelled: a plan lists it so, --apply waits without a patch.
    let plan = recover(&cp, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(nodes_in(&plan.json(), "cancelled"), [A]);
    assert_eq!(plan.json()["recoverable"], json!([]));
    let version = n.metadata.resource_version.clone();
    let again = recover(&cp, &["--apply", "--timeout", "2s"]).await;
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(
        again.stderr.contains("already cancelled by an earlier run"),
        "{again:?}"
    );
    assert_eq!(
        node(&cp, A).await.metadata.resource_version,
        version,
        "nothing patched twice"
    );
    assert_eq!(recovery_events(&cp, A).await.len(), 1, "no second Event");

    // Once the daemon's no-op update is done, a waiting run reports the node recovered.
    let waiting = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    complete_no_op_update(&cp, A).await;
    let done = waiting.await.expect("run");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(
        done.json()["applied"][0]["outcome"],
        "recovered",
        "{done:?}"
    );
    assert_eq!(
        node(&cp, A)
            .await
            .metadata
            .annotations
            .as_ref()
            .map(|a| a.contains_key(MARKER)),
        Some(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_stops_when_the_node_moved_between_its_read_and_the_patch() {
    let cp = stuck_cluster(&[A]).await;
    // Someone uncordons the node right after recover read it (while it records its Event).
    let client = cp.client();
    let _interposer = interpose::on_node_event(&cp, A, move || {
        let nodes: Api<Node> = Api::all(client.clone());
        async move {
            nodes
                .patch(
                    A,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": null}})),
                )
                .await
                .expect("uncordon");
        }
    })
    .await;
    let run = recover(&cp, &["--apply", "--timeout", "5s", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let applied = &run.json()["applied"][0];
    assert_eq!(applied["outcome"], "stopped", "{run:?}");
    assert_eq!(applied["problem"], "patchRefused", "{run:?}");
    assert!(
        applied["why"]
            .as_str()
            .is_some_and(|w| w.contains("nothing was written")),
        "{applied:#}"
    );
    let n = node(&cp, A).await;
    assert_eq!(
        annotation(&n, &key("desiredImage")).as_deref(),
        Some(LOST_IMAGE),
        "not cancelled"
    );
    assert_eq!(annotation(&n, MARKER), None);
    assert!(!cordoned(&n), "only the interposed change happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_between_its_read_and_the_patch_is_nothing_to_do_and_the_run_goes_on() {
    let cp = stuck_cluster(&[A, B]).await;
    // The machine is scaled away right after recover read A (while it records its Event).
    let client = cp.client();
    let _interposer = interpose::on_node_event(&cp, A, move || {
        let nodes: Api<Node> = Api::all(client.clone());
        async move {
            nodes
                .delete(A, &Default::default())
                .await
                .expect("delete the node");
        }
    })
    .await;
    let run = recover(&cp, &["--apply", "--timeout", "5s", "-o", "json"]).await;
    let report = run.json();
    let a = &report["applied"][0];
    assert_eq!(a["node"], A, "{report:#}");
    assert_eq!(a["outcome"], "nothingToDo", "{report:#}");
    assert!(
        a["why"]
            .as_str()
            .is_some_and(|w| w.contains("deleted between its re-read and the patch")),
        "{a:#}"
    );
    // Not a failure (nothing was written, nothing is left to recover): B is attempted next.
    assert_eq!(report["applied"][1]["node"], B, "{report:#}");
    assert_ne!(
        report["applied"][1]["outcome"], "notAttempted",
        "{report:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_re_plans_each_node_and_stops_at_one_that_changed_since_the_plan() {
    let cp = stuck_cluster(&[A, B]).await;
    let run = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    // While recover waits for worker-a's daemon, worker-b is uncordoned by hand.
    wait_cancelled(&cp, A).await;
    merge(&cp, B, json!({"spec": {"unschedulable": null}})).await;
    complete_no_op_update(&cp, A).await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(report["applied"][1]["node"], B);
    assert_eq!(
        report["applied"][1]["problem"], "changedSincePlan",
        "{report:#}"
    );
    assert!(
        report["applied"][1]["why"]
            .as_str()
            .is_some_and(|w| w.contains("uncordoned by hand")),
        "{report:#}"
    );
    let b = node(&cp, B).await;
    assert_eq!(
        annotation(&b, &key("desiredImage")).as_deref(),
        Some(LOST_IMAGE)
    );
    assert_eq!(annotation(&b, MARKER), None);
    assert!(recovery_events(&cp, B).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_waiting_leaves_a_node_the_next_run_takes_over() {
    let cp = stuck_cluster(&[A, B]).await;
    let running = BIN
        .cli()
        .args(["recover", VERIFIED, "--apply", "-o", "json"])
        .kubeconfig(cp.kubeconfig())
        .start();
    wait_cancelled(&cp, A).await;
    running.interrupt();
    let run = running.finish().await;
    assert_eq!(run.code, Some(130), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "interrupted", "{report:#}");
    // The node not reached is listed, as when a run stops, and left as it was.
    assert_eq!(report["applied"][1]["node"], B, "{report:#}");
    assert_eq!(
        report["applied"][1]["outcome"], "notAttempted",
        "{report:#}"
    );
    assert_eq!(annotation(&node(&cp, B).await, MARKER), None);
    assert!(run.stderr.contains("run recover --apply again"), "{run:?}");
    // The next run takes it over: cancelled, nothing patched twice.
    let plan = recover(&cp, &["-o", "json"]).await;
    assert_eq!(nodes_in(&plan.json(), "cancelled"), [A], "{plan:?}");
    assert_eq!(recovery_events(&cp, A).await.len(), 1);
}

/// The two ways a cancelled node can leave the no-op update that `--apply` must not call a
/// recovery: it booted (a new bootID), or it was sent a new target while still Degraded (MCO
/// retargets only Done nodes). Each stops the run, exit 1, nothing more written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_stops_at_a_reboot_and_at_a_new_target_on_a_degraded_node() {
    let cp = stuck_cluster(&[A, B]).await;
    let run = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    Api::<Node>::all(cp.client())
        .patch_status(
            A,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nodeInfo": {"bootID": "another-boot"}}})),
        )
        .await
        .expect("boot ID");
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["problem"], "rebooted", "{report:#}");
    assert_eq!(
        report["applied"][1]["outcome"], "notAttempted",
        "{report:#}"
    );
    assert_eq!(annotation(&node(&cp, B).await, MARKER), None);

    // B: cancelled by the next run, then retargeted by hand while still Degraded.
    let run = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, B).await;
    merge(
        &cp,
        B,
        json!({"metadata": {"annotations": {key("desiredConfig"): "rendered-worker-by-hand"}}}),
    )
    .await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    let b = report["applied"]
        .as_array()
        .and_then(|a| a.iter().find(|n| n["node"] == B))
        .cloned()
        .unwrap_or_default();
    assert_eq!(b["problem"], "retargeted", "{report:#}");
    assert_ne!(b["outcome"], "movedOn", "{report:#}");
}
