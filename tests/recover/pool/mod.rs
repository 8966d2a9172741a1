//! A pool the bug already degraded, and the way back, on a real control plane, registry and the
//! MCO simulator: the report's deletion without the guard leaves the updating node Degraded,
//! cordoned and drained, its daemon retrying for ever, and with the default `maxUnavailable: 1`
//! nothing else in the pool moves; cancelling the failed target brings it back without a reboot
//! and MCO finishes the pool. One file per story:
//! - [`by_hand`]: the runbook's plain `kubectl` steps, on 4.20 and on 4.22 (whose reasons differ);
//! - [`with_the_command`]: `mosc-guard recover` plans the same cancel and `--apply --wait`
//!   carries it out, on 4.20 and on 4.22;
//! - [`two_pools`]: two pools stuck at once, healed by one command, one node after the other;
//! - [`several_at_once`]: a pool that updates two nodes at once, where MCO sends the node its
//!   pool's target before its daemon reports Done: a recovery, and the run goes on;
//! - [`recreated`]: a MOSC recreated before the recovery, whose build waits while the pool is
//!   degraded: no pause needed, and the pool rolls out its new image afterwards;
//! - [`uncordoned`]: a node uncordoned by hand: refused until it is cordoned again;
//! - [`interrupted`]: a run that times out, one interrupted (Ctrl-C), then one that finishes:
//!   the node is patched once.
//!
//! - [`registry`]: what the registry says decides: an image it still serves is not cancelled
//!   (and the daemon's retry heals the node), one it cannot tell about needs a person or
//!   `--image-loss-verified`, one served again between the plan and the patch stops `--apply`.
//!
//! On OpenShift `recover` asks the registry, as the nodes pull, whether a stuck node's image is
//! gone; so every story's cluster has the kit's registry as nodes reach one ([`nodes_registry`]:
//! TLS, token auth, the ControllerConfig and an ImageDigestMirrorSet), and MCO's deletion of
//! the image makes it answer `MANIFEST_UNKNOWN` there.
//!
//! Every test starts its own control plane. The report's path to the stuck node runs at the real
//! machine-os-builder's timing (`SimConfig::real_timing`) in [`by_hand`] and [`with_the_command`];
//! the other stories, whose subject is the way back, run its builds and delete events in
//! milliseconds (`SimConfig::fast`: the daemons' and drain controller's timing is the same in
//! both), which keeps the binary around three minutes on two threads (174 s measured with its 12
//! tests on a shared, loaded 2-core machine; 93 s before the 3 registry stories). The stuck node
//! is made by
//! `testkit::scenario::lose_the_image`; the command is the real binary, run as the admin.

mod by_hand;
mod interrupted;
mod recreated;
mod registry;
mod several_at_once;
mod two_pools;
mod uncordoned;
mod with_the_command;

use serde_json::{Value, json};
use testkit::cli::{CliRun, Running};
use testkit::guard::GuardBin;
use testkit::mco::{CURRENT_CONFIG, DESIRED_IMAGE};
use testkit::node_registry::SecureFace;
use testkit::scenario::*;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// The annotation `recover --apply` writes with its patch (what the node was before it).
const MARKER: &str = "mosc-guard.dev/recovery";
/// The Event `recover --apply` records on the node right before its patch.
const EVENT_REASON: &str = "LostImageTargetCancelled";

/// The kit's registry as the cluster's nodes reach it ([`SecureFace::for_nodes`]: TLS, token
/// auth, the ControllerConfig's pull secret and CA, an ImageDigestMirrorSet), where `recover`
/// asks whether a stuck node's image is gone. Keep it for the test: dropped, it stops answering.
/// The simulated daemons still pull from the kit's registry directly: the same storage, so the
/// same answers.
async fn nodes_registry(cluster: &Cluster) -> SecureFace {
    SecureFace::for_nodes(&cluster.client, &cluster.registry)
        .await
        .expect("the registry as nodes reach it")
}

/// `mosc-guard recover ARGS --kubeconfig <admin>`, to its end.
async fn recover(cluster: &Cluster, args: &[&str]) -> CliRun {
    recover_cli(cluster, args).run_async().await
}

/// `mosc-guard recover ARGS --kubeconfig <admin>`, started: the test watches it meanwhile.
fn start_recover(cluster: &Cluster, args: &[&str]) -> Running {
    recover_cli(cluster, args).start()
}

fn recover_cli(cluster: &Cluster, args: &[&str]) -> testkit::cli::Cli {
    BIN.cli()
        .arg("recover")
        .args(args)
        .kubeconfig(cluster.cp.kubeconfig())
}

/// `recover --apply --wait -o json` to its end, which must be exit 0 (every node recovered, every
/// pool finished); the run (its progress lines) and its report.
async fn apply_and_wait(cluster: &Cluster) -> (CliRun, Value) {
    let run = recover(
        cluster,
        &["--apply", "--wait", "--timeout", "2m", "-o", "json"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    (run, report)
}

/// Asserts that `recover` refuses `stuck`'s node for `problem` alone, saying to do `remedy`
/// (exit 1), and that `recover --apply` then writes nothing (exit 1).
async fn assert_refused(cluster: &Cluster, stuck: &Stuck, problem: &str, remedy: &str) {
    let plan = recover(cluster, &["-o", "json"]).await;
    assert_eq!(plan.code, Some(1), "{plan:?}");
    let report = plan.json();
    assert_eq!(nodes_in(&report, "needsAttention"), [stuck.node.as_str()]);
    let attention = &report["needsAttention"][0];
    assert_eq!(attention["problems"], json!([problem]), "{attention:#}");
    assert!(
        attention["do"][0]
            .as_str()
            .is_some_and(|d| d.contains(remedy)),
        "{remedy:?}: {attention:#}"
    );
    let apply = recover(cluster, &["--apply", "-o", "json"]).await;
    assert_eq!(apply.code, Some(1), "{apply:?}");
    assert_eq!(apply.json()["applied"], json!([]), "{apply:?}");
    assert_untouched(cluster, stuck).await;
}

/// The nodes listed under `key` of a `recover -o json` report.
fn nodes_in<'r>(report: &'r Value, key: &str) -> Vec<&'r str> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is an array: {report:#}"))
        .iter()
        .map(|n| n["node"].as_str().unwrap_or_default())
        .collect()
}

/// Asserts that `recoverable` (one entry of a plan) cancels `stuck` with the runbook's manual
/// cancel ([`cancel_patch`]): every one of its operations, in its order, and besides them only
/// more `test` operations (on more of what the plan read) and the marker; and that its
/// `command` is `oc patch node <node> --type=json -p '<that patch>'`.
fn assert_the_runbook_cancel(recoverable: &Value, stuck: &Stuck) {
    assert_eq!(recoverable["node"], stuck.node.as_str(), "{recoverable:#}");
    assert_eq!(recoverable["pool"], stuck.pool.as_str(), "{recoverable:#}");
    assert_eq!(
        recoverable["image"],
        stuck.image.as_str(),
        "{recoverable:#}"
    );
    assert_eq!(
        recoverable["bootID"],
        stuck.boot_id.as_str(),
        "{recoverable:#}"
    );
    let ops = recoverable["patch"].as_array().expect("patch operations");
    let manual = cancel_patch(stuck);
    let manual = manual.as_array().expect("the manual cancel's operations");
    let shared: Vec<&Value> = ops.iter().filter(|op| manual.contains(op)).collect();
    assert_eq!(
        shared,
        manual.iter().collect::<Vec<_>>(),
        "the command's patch holds the manual cancel, in its order: {ops:#?}"
    );
    let marker_path = format!("/metadata/annotations/{}", MARKER.replace('/', "~1"));
    for op in ops.iter().filter(|op| !manual.contains(op)) {
        let test = op["op"] == "test";
        let marker = op["op"] == "add" && op["path"] == marker_path.as_str();
        assert!(
            test || marker,
            "beyond the manual cancel only tests and the marker: {op}"
        );
    }
    let command = recoverable["command"].as_str().expect("command");
    let prefix = format!("oc patch node {} --type=json -p ", stuck.node);
    let quoted = command
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{command}"));
    let json = quoted
        .strip_prefix('\'')
        .and_then(|q| q.strip_suffix('\''))
        .map(|q| q.replace(r"'\''", "'"))
        .unwrap_or_else(|| quoted.to_owned());
    let in_command: Value = serde_json::from_str(&json).expect("the command's patch is JSON");
    assert_eq!(
        &in_command, &recoverable["patch"],
        "the command runs the patch"
    );
}

/// Asserts that nothing was written to `stuck`'s node: its failed target is still there, no
/// marker, no recovery Event.
async fn assert_untouched(cluster: &Cluster, stuck: &Stuck) {
    let a = node_annotations(&cluster.client, &stuck.node)
        .await
        .expect("node");
    assert_eq!(a.get(DESIRED_IMAGE), Some(&stuck.image), "target kept");
    assert_eq!(a.get(MARKER), None, "no marker");
    assert_eq!(recovery_events(cluster, stuck).await, 0, "no Event");
}

/// How many recovery Events were recorded about `stuck`'s node.
async fn recovery_events(cluster: &Cluster, stuck: &Stuck) -> usize {
    events_about(&cluster.client, "Node", &stuck.node, EVENT_REASON)
        .await
        .len()
}

/// Asserts the recovery's record of `stuck`: one Event about the node, and the marker holding
/// its annotations and boot ID as they were before the patch (`annotations`: the node now).
async fn assert_recorded_once(
    cluster: &Cluster,
    stuck: &Stuck,
    annotations: &std::collections::BTreeMap<String, String>,
) {
    assert_eq!(recovery_events(cluster, stuck).await, 1, "one Event");
    let marker: Value = serde_json::from_str(annotations.get(MARKER).expect("the marker"))
        .expect("the marker is JSON");
    assert_eq!(
        marker["annotations"][DESIRED_IMAGE],
        stuck.image.as_str(),
        "{marker:#}"
    );
    assert_eq!(
        marker["annotations"][CURRENT_CONFIG],
        stuck.config.as_str(),
        "{marker:#}"
    );
    assert_eq!(marker["bootID"], stuck.boot_id.as_str(), "{marker:#}");
}

/// Asserts that pool `pool` is healthy as MCO reports it: Updated, not NodeDegraded, not
/// Degraded.
async fn assert_pool_healthy(cluster: &Cluster, pool: &str) {
    let conditions = pool_conditions(&cluster.client, pool).await.expect("pool");
    let status = |t: &str| conditions.get(t).map(|c| c.status.clone());
    assert_eq!(
        (
            status("Updated"),
            status("NodeDegraded"),
            status("Degraded")
        ),
        (
            Some("True".to_owned()),
            Some("False".to_owned()),
            Some("False".to_owned())
        ),
        "pool {pool}: {conditions:?}"
    );
}

/// A custom pool `infra` of two nodes labelled as OpenShift labels infra nodes (worker and infra
/// roles: MCO puts them in the custom pool), settled on its own rendered config; its nodes.
async fn infra_pool(cluster: &Cluster) -> Vec<String> {
    const INFRA_ROLE: &str = "node-role.kubernetes.io/infra";
    let infra: Vec<String> = (0..2)
        .map(|i| format!("ip-10-0-200-{}.us-east-2.compute.internal", 10 + i))
        .collect();
    create_pool(&cluster.client, "infra", INFRA_ROLE, 1)
        .await
        .expect("pool infra");
    create_labelled_nodes(
        &cluster.client,
        &infra,
        &[(WORKER_ROLE_LABEL, ""), (INFRA_ROLE, "")],
        &rendered_config("infra"),
    )
    .await
    .expect("infra nodes");
    // Settled first: every infra node Done on infra's config and the pool Updated.
    wait_pool_settled_in(
        cluster,
        "infra",
        &infra,
        |a| a.get(CURRENT_CONFIG) == Some(&rendered_config("infra")),
        "the infra nodes on pool infra's config",
    )
    .await;
    infra
}

/// `(entry[a], entry[b])` of each entry of a JSON array.
fn pairs<'v>(list: &'v Value, a: &str, b: &str) -> Vec<(&'v str, &'v str)> {
    list.as_array()
        .unwrap_or_else(|| panic!("an array: {list:#}"))
        .iter()
        .map(|e| {
            (
                e[a].as_str().unwrap_or_default(),
                e[b].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

/// The line of `run`'s progress (stderr) that holds `text`; panics if there is none.
fn progress_line(run: &CliRun, text: &str) -> usize {
    run.stderr
        .lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no progress line with {text:?}: {run:?}"))
}
