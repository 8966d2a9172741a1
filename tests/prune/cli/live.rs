//! `prune` against a real kube-apiserver with the guard registered as its webhook (deny mode):
//! the plan writes nothing; `--apply` deletes the deletable builds one at a time and nothing
//! else; it stops, writing nothing more, at a build that became needed after the plan, at a
//! delete the guard refuses, at a delete whose preconditions fail, at a build that does not go
//! within `--timeout`; Ctrl-C says where it was. The objects are written as MCO writes them
//! (no simulator: MCO's handling of the images is tests/prune/rollouts's).

use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use testkit::controlplane::ControlPlane;
use testkit::guard::Guard;
use testkit::mco;
use testkit::scenario::{WORKER_ROLE_LABEL, create_mosc, create_nodes, create_pool};
use testkit::webhooks::register_validating_webhook;

use super::interpose::{Target, on_delete};
use super::*;

/// A control plane with pool worker, MachineOSConfig worker and builds 1 to `n` of it (created
/// now, so `--keep-younger-than 0s` is needed to let any go), the config and the pool on build
/// `n`, and worker nodes wanting and running the images given; the guard in front.
struct Live {
    cp: ControlPlane,
    _guard: Guard,
}

async fn history(n: u8, nodes: &[(&str, u8, u8)]) -> Live {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    create_pool(&client, "worker", WORKER_ROLE_LABEL, 1)
        .await
        .expect("pool");
    let pools = mco::mcps(&client);
    let target = json!({"spec": {"configuration": {"name": rendered(n)}}});
    pools
        .patch("worker", &PatchParams::default(), &Patch::Merge(&target))
        .await
        .expect("pool's target");
    let status = json!({"status": {"configuration": {"name": rendered(n)}}});
    pools
        .patch_status("worker", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pool's status");
    create_mosc(&client, "worker", &format!("{REPO}:latest"))
        .await
        .expect("MOSC");
    let config_uid = mco::moscs(&client)
        .get("worker")
        .await
        .expect("MOSC")
        .metadata
        .uid
        .expect("uid");
    for i in 1..=n {
        create_build(&client, build(i, None, &config_uid)).await;
    }
    let current = mosc(n, None);
    let builds = mco::moscs(&client);
    builds
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": current["metadata"]})),
        )
        .await
        .expect("MOSC's current build");
    builds
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": current["status"]})),
        )
        .await
        .expect("MOSC's current image");
    let names: Vec<String> = nodes.iter().map(|(name, _, _)| name.to_string()).collect();
    create_nodes(&client, &names, WORKER_ROLE_LABEL, &rendered(n))
        .await
        .expect("nodes");
    for &(name, desired, current) in nodes {
        want(&cp, name, desired, current).await;
    }
    let guard = BIN.serve(&cp).start().await.expect("guard");
    register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    Live { cp, _guard: guard }
}

/// Creates a build from its JSON (the status written through its subresource, as MCO does).
async fn create_build(client: &kube::Client, build: Value) {
    let api = mco::mosbs(client);
    let object: DynamicObject = serde_json::from_value(build.clone()).expect("build");
    let name = object.metadata.name.clone().expect("name");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create build");
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": build["status"]})),
    )
    .await
    .expect("build status");
}

/// Node `name` wants image `desired` and runs `current`.
async fn want(cp: &ControlPlane, name: &str, desired: u8, current: u8) {
    let patch = json!({"metadata": {"annotations": node(name, desired, current)["metadata"]["annotations"]}});
    mco::nodes(&cp.client())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("node's images");
}

async fn prune(cp: &ControlPlane, args: &[&str]) -> CliRun {
    let mut all = vec!["prune", "--keep-younger-than", "0s"];
    all.extend_from_slice(args);
    BIN.cli()
        .args(&all)
        .kubeconfig(cp.kubeconfig())
        .run_async()
        .await
}

/// The builds that still exist.
async fn existing(cp: &ControlPlane) -> Vec<String> {
    let mut names: Vec<String> = mco::mosbs(&cp.client())
        .list(&Default::default())
        .await
        .expect("builds")
        .items
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .collect();
    names.sort();
    names
}

/// `(build, outcome, problem)` of each `applied[]` entry.
fn applied(report: &Value) -> Vec<(String, String, Option<String>)> {
    report["applied"]
        .as_array()
        .unwrap_or_else(|| panic!("applied[]: {report:#}"))
        .iter()
        .map(|a| {
            (
                a["build"].as_str().expect("build").to_string(),
                a["outcome"].as_str().expect("outcome").to_string(),
                a["problem"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// A merge patch sending a node to image `n`.
fn wants(n: u8) -> Value {
    json!({"metadata": {"annotations": {"machineconfiguration.openshift.io/desiredImage": image(n)}}})
}

fn entry(n: u8, outcome: &str, problem: Option<&str>) -> (String, String, Option<String>) {
    (
        build_name(n),
        outcome.to_string(),
        problem.map(str::to_string),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_writes_nothing_and_apply_deletes_only_the_deletable_builds() {
    let live = history(4, &[("worker-a", 4, 4), ("worker-b", 2, 2)]).await;
    let run = prune(&live.cp, &["--keep", "0", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(builds_in(&run.json(), "deletable"), names(&[1, 3]));
    assert_eq!(
        existing(&live.cp).await,
        names(&[1, 2, 3, 4]),
        "the plan wrote nothing"
    );
    // No ControllerConfig (not a cluster MCO manages): no registry is asked, which --images
    // makes a failure.
    let report = run.json();
    assert_eq!(report["images"], json!([]), "{report:#}");
    let said = |report: &Value| {
        report["warnings"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w.as_str()
                    .is_some_and(|w| w.contains("no ControllerConfig"))
            })
        })
    };
    assert!(said(&report), "{report:#}");
    let run = prune(&live.cp, &["--keep", "0", "--images", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(said(&run.json()), "{run:?}");

    let run = prune(&live.cp, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(
        applied(&report),
        [entry(1, "deleted", None), entry(3, "deleted", None)],
        "{report:#}"
    );
    assert!(
        run.stderr.contains(&format!(
            "build {}: still deletable; deleting it (uid ",
            build_name(1)
        )) && run
            .stderr
            .contains("delete accepted; waiting up to 5m for it to go"),
        "{run:?}"
    );
    assert_eq!(existing(&live.cp).await, names(&[2, 4]));

    // Again: nothing left to delete, nothing written.
    let run = prune(&live.cp, &["--keep", "0", "--apply"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("nothing to apply: no build is deletable"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("0 of 2 MachineOSBuilds can be deleted"),
        "{run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_becomes_needed_after_the_plan_stops_the_run_before_its_delete() {
    let live = history(4, &[("worker-a", 4, 4), ("worker-b", 4, 4)]).await;
    // While build 1 is being deleted, worker-a is sent to build 2's image.
    let _interposer = on_delete(&live.cp, &build_name(1), Target::Node("worker-a"), wants(2)).await;
    let run = prune(&live.cp, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(
        applied(&report),
        [
            entry(1, "deleted", None),
            entry(2, "stopped", Some("changedSincePlan")),
            entry(3, "notAttempted", None)
        ],
        "{report:#}"
    );
    let why = report["applied"][1]["why"].as_str().expect("why");
    assert!(
        why.contains("the fresh plan keeps it")
            && why.contains("1 node is updating to its image")
            && why.contains("worker-a"),
        "{why}"
    );
    assert_eq!(
        builds_in(&report, "deletable"),
        names(&[1, 2, 3]),
        "the plan it started from"
    );
    assert_eq!(existing(&live.cp).await, names(&[2, 3, 4]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_the_guard_refuses_stops_the_run_and_is_not_retried() {
    let live = history(3, &[("worker-a", 3, 3)]).await;
    // Between prune's read and its delete, worker-a is sent to build 1's image: the guard's
    // confirming read sees it and refuses.
    let _interposer = on_delete(&live.cp, &build_name(1), Target::Node("worker-a"), wants(1)).await;
    let run = prune(&live.cp, &["--keep", "0", "--apply"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stdout.contains(&format!("  STOPPED build {} (", build_name(1)))
            && run.stdout.contains("the API server refused the delete; nothing was deleted, and prune does not try another way")
            && run.stdout.contains("cannot be deleted yet")
            && run.stdout.contains("worker-a"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains(&format!("  NOT ATTEMPTED build {} (", build_name(2))),
        "{run:?}"
    );
    assert_eq!(
        run.stderr.matches("deleting it (uid").count(),
        1,
        "one delete, not retried: {run:?}"
    );
    assert_eq!(existing(&live.cp).await, names(&[1, 2, 3]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_changed_between_the_read_and_the_delete_is_not_deleted() {
    let live = history(3, &[("worker-a", 3, 3)]).await;
    let touched = json!({"metadata": {"annotations": {"example.com/touched": "yes"}}});
    let _interposer = on_delete(
        &live.cp,
        &build_name(1),
        Target::Build(build_name(1)),
        touched,
    )
    .await;
    let run = prune(&live.cp, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(
        applied(&report),
        [
            entry(1, "stopped", Some("changedSincePlan")),
            entry(2, "notAttempted", None)
        ],
        "{report:#}"
    );
    let why = report["applied"][0]["why"].as_str().expect("why");
    assert!(
        why.contains("preconditions") && why.contains("nothing was deleted"),
        "{why}"
    );
    assert_eq!(existing(&live.cp).await, names(&[1, 2, 3]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_does_not_go_stops_the_run_and_ctrl_c_says_where_it_was() {
    let live = history(3, &[("worker-a", 3, 3)]).await;
    // A finalizer nobody removes: a delete is accepted, the build stays.
    let hold = json!({"metadata": {"finalizers": ["foregroundDeletion", "example.com/hold"]}});
    for n in [1, 2] {
        mco::mosbs(&live.cp.client())
            .patch(
                &build_name(n),
                &PatchParams::default(),
                &Patch::Merge(&hold),
            )
            .await
            .expect("hold the build");
    }
    let run = prune(
        &live.cp,
        &["--keep", "0", "--apply", "--timeout", "2s", "-o", "json"],
    )
    .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.json();
    assert_eq!(
        applied(&report),
        [
            entry(1, "stopped", Some("timedOut")),
            entry(2, "notAttempted", None)
        ],
        "{report:#}"
    );
    assert!(
        report["applied"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("still there after 2s")),
        "{report:#}"
    );

    // Again, and Ctrl-C while it waits for build 2: build 1, being deleted, is kept now.
    let running = BIN
        .cli()
        .args([
            "prune",
            "--keep",
            "0",
            "--keep-younger-than",
            "0s",
            "--apply",
            "-o",
            "json",
        ])
        .kubeconfig(live.cp.kubeconfig())
        .start();
    running
        .wait_for_stderr("delete accepted; waiting", Duration::from_secs(30))
        .await
        .expect("waiting for build 2");
    running.interrupt();
    let run = running.finish().await;
    assert_eq!(run.code, Some(130), "{run:?}");
    let report = run.json();
    assert_eq!(
        applied(&report),
        [entry(2, "interrupted", None)],
        "{report:#}"
    );
    assert!(
        report["applied"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("after the API server accepted its delete")),
        "{report:#}"
    );
    assert_eq!(
        report["kept"][0]["reasons"],
        json!(["beingDeleted"]),
        "{report:#}"
    );
    assert_eq!(
        existing(&live.cp).await,
        names(&[1, 2, 3]),
        "held by the finalizer"
    );
}
