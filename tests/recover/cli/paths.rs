//! `recover --apply` on the paths between the happy one and the stops of [`super::live`], each
//! against a real kube-apiserver: a node deleted while the run waits for it (`nodeGone`), a node
//! a person fixed since the plan (`nothingToDo`, the run goes on), a re-read and a patch that
//! fail (exit 2, and the report says whether anything may have been written), an Event the
//! admin may not write (the run goes on: the patch carries the record), `--wait` ending with
//! the pool gone or past its timeout; and the text output, which prints the 3 KB patch once.
//! The restricted admins are real users with exactly the RBAC each test gives them.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use testkit::controlplane::ControlPlane;
use testkit::users;

use super::live::{
    A, B, OLD, VERIFIED, annotation, complete_no_op_update, merge, node, recover, recovery_events,
    spawn_recover, stuck_cluster, wait_cancelled,
};
use super::*;

/// What `recover --apply` reads and writes, as RBAC: `patch nodes` and `create events` when
/// `patch`/`events`; `list machineconfigs` unless `!machine_configs`.
fn recover_rbac(user: &str, patch: bool, events: bool, machine_configs: bool) -> String {
    let node_verbs = if patch {
        "[get, list, patch]"
    } else {
        "[get, list]"
    };
    let configs = if machine_configs {
        ", machineconfigs"
    } else {
        ""
    };
    let events = if events {
        "\n- apiGroups: [\"\"]\n  resources: [events]\n  verbs: [create]"
    } else {
        ""
    };
    format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {user}}}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: {node_verbs}
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds, machineconfigpools{configs}]
  verbs: [get, list]
- apiGroups: [config.openshift.io]
  resources: [clusterversions]
  verbs: [get, list]
- apiGroups: [machine.openshift.io]
  resources: [machines]
  verbs: [get, list]{events}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {user}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {user}}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
"#
    )
}

/// A user with [`recover_rbac`], in effect; its kubeconfig (in `dir`).
async fn admin_with(
    cp: &ControlPlane,
    user: &str,
    dir: &tempfile::TempDir,
    (patch, events, machine_configs): (bool, bool, bool),
) -> PathBuf {
    users::apply(cp, &recover_rbac(user, patch, events, machine_configs))
        .await
        .expect("RBAC");
    users::wait_can_i(cp, "list", "nodes", user, true)
        .await
        .expect("RBAC in effect");
    users::wait_can_i(cp, "patch", "nodes", user, patch)
        .await
        .expect("RBAC in effect");
    users::kubeconfig(cp, user, dir.path()).expect("kubeconfig")
}

/// `mosc-guard recover --image-loss-verified ARGS` as the user of `kubeconfig`, started (the
/// registry cannot be asked here: [`super::live`]).
fn spawn_as(kubeconfig: PathBuf, args: &[&str]) -> tokio::task::JoinHandle<CliRun> {
    let mut all = vec!["recover".to_string(), VERIFIED.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    tokio::spawn(BIN.cli().args(&all).kubeconfig(&kubeconfig).run_async())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_while_waited_for_stops_the_run() {
    let cp = stuck_cluster(&[A]).await;
    let run = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    Api::<Node>::all(cp.client())
        .delete(A, &DeleteParams::default())
        .await
        .expect("delete node");
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["problem"], "nodeGone", "{report:#}");
    assert_eq!(report["needsAttention"][0]["problems"], json!(["nodeGone"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_fixed_since_the_plan_is_nothing_to_do_and_the_run_goes_on() {
    let cp = stuck_cluster(&[A, B]).await;
    let run = spawn_recover(&cp, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    // Someone brought worker-b back by hand (its old target, Done, uncordoned) meanwhile.
    merge(
        &cp,
        B,
        json!({"metadata": {"annotations": {
            super::live::key("desiredImage"): super::live::RAN,
            super::live::key("desiredConfig"): OLD,
            super::live::key("state"): "Done", super::live::key("reason"): null}},
            "spec": {"unschedulable": null}}),
    )
    .await;
    let version = node(&cp, B).await.metadata.resource_version;
    complete_no_op_update(&cp, A).await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(report["applied"][1]["node"], B, "{report:#}");
    assert_eq!(report["applied"][1]["outcome"], "nothingToDo", "{report:#}");
    assert_eq!(report["needsAttention"], json!([]), "{report:#}");
    assert_eq!(
        node(&cp, B).await.metadata.resource_version,
        version,
        "nothing written to worker-b"
    );
    assert!(recovery_events(&cp, B).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_read_that_fails_stops_the_run_before_the_next_node_is_touched() {
    let cp = stuck_cluster(&[A, B]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = admin_with(&cp, "recover-reread", &dir, (true, true, true)).await;
    let run = spawn_as(kubeconfig, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    // While the run waits for worker-a, the admin loses `list machineconfigs`: the re-read of
    // worker-b's plan fails.
    users::apply(&cp, &recover_rbac("recover-reread", true, true, false))
        .await
        .expect("RBAC");
    users::wait_can_i(
        &cp,
        "list",
        "machineconfigs.machineconfiguration.openshift.io",
        "recover-reread",
        false,
    )
    .await
    .expect("revoked");
    complete_no_op_update(&cp, A).await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(2), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    let b = &report["applied"][1];
    assert_eq!(b["outcome"], "failed", "{report:#}");
    assert!(
        b["why"]
            .as_str()
            .is_some_and(|w| w.contains("could not re-read it")),
        "{b:#}"
    );
    assert_eq!(b.get("recorded"), None, "no patch attempted: {b:#}");
    assert_eq!(annotation(&node(&cp, B).await, MARKER), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_refused_by_rbac_wrote_nothing_and_says_so_and_an_unwritable_event_does_not_stop_a_run()
 {
    let cp = stuck_cluster(&[A]).await;
    let dir = tempfile::tempdir().expect("tempdir");

    // No `patch nodes`: the API server answers 403; nothing was written (exit 2).
    let kubeconfig = admin_with(&cp, "recover-nopatch", &dir, (false, true, true)).await;
    let run = spawn_as(kubeconfig, &["--apply", "--timeout", "10s", "-o", "json"])
        .await
        .expect("run");
    assert_eq!(run.code, Some(2), "{run:?}");
    let applied = &run.json()["applied"][0];
    assert_eq!(applied["outcome"], "failed", "{applied:#}");
    let why = applied["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("403") && why.contains("nothing was written"),
        "{why}"
    );
    assert!(
        applied["recorded"].is_object(),
        "the attempt is recorded: {applied:#}"
    );
    assert_eq!(annotation(&node(&cp, A).await, MARKER), None);

    // No `create events`: the run says so and goes on; the patch carries the record.
    let kubeconfig = admin_with(&cp, "recover-noevents", &dir, (true, false, true)).await;
    let run = spawn_as(kubeconfig, &["--apply", "--timeout", "60s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    complete_no_op_update(&cp, A).await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(0), "{run:?}");
    let applied = &run.json()["applied"][0];
    assert_eq!(applied["outcome"], "recovered", "{applied:#}");
    assert!(
        applied["event"]
            .as_str()
            .is_some_and(|e| e.starts_with("not written")),
        "{applied:#}"
    );
    assert!(run.stderr.contains("could not record the Event"), "{run:?}");
    let marker: serde_json::Value =
        serde_json::from_str(&annotation(&node(&cp, A).await, MARKER).expect("marker"))
            .expect("marker JSON");
    assert_eq!(
        marker["annotations"][super::live::key("desiredImage")],
        LOST_IMAGE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ends_with_the_pool_gone_or_past_its_timeout() {
    let cp = stuck_cluster(&[A]).await;
    // Nobody finishes the pool (no MCO here): past --timeout, timedOut, exit 1.
    let run = spawn_recover(&cp, &["--apply", "--wait", "--timeout", "6s", "-o", "json"]);
    wait_cancelled(&cp, A).await;
    complete_no_op_update(&cp, A).await;
    let run = run.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(report["applied"][0]["outcome"], "recovered", "{report:#}");
    assert_eq!(report["pools"][0]["outcome"], "timedOut", "{report:#}");
    assert!(
        report["pools"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("waiting for Updated=True")),
        "{report:#}"
    );

    // The pool deleted while waited for: gone, exit 1.
    let cp = stuck_cluster(&[B]).await;
    let run = spawn_recover(
        &cp,
        &["--apply", "--wait", "--timeout", "60s", "-o", "json"],
    );
    wait_cancelled(&cp, B).await;
    complete_no_op_update(&cp, B).await;
    let running = run;
    tokio::time::sleep(Duration::from_secs(2)).await;
    testkit::mco::mcps(&cp.client())
        .delete("worker", &DeleteParams::default())
        .await
        .expect("delete pool");
    let run = running.await.expect("run");
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.json()["pools"][0]["outcome"], "gone", "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_in_text_prints_the_patch_once() {
    let cp = stuck_cluster(&[A]).await;
    let run = recover(&cp, &["--apply", "--timeout", "3s"]).await;
    assert_eq!(run.code, Some(1), "nobody completes the update: {run:?}");
    let command = format!("oc patch node {A} --type=json -p");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(all.matches(&command).count(), 1, "{run:?}");
    assert!(
        run.stderr.contains("patching with the plan's patch"),
        "{run:?}"
    );
    // The daemon's whole reason is in the marker, not repeated on the terminal.
    assert_eq!(
        all.matches("timed out waiting for the condition").count(),
        1,
        "{run:?}"
    );
}
