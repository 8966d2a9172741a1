//! Defer mode (`serve --deletion-mode defer`) on a real control plane, registry and the MCO 4.20
//! simulator: the mutating webhook adds the finalizer, the validating webhook accepts the delete
//! with a warning, and the finalizer controller (Lease holder only) releases the MachineOSConfig
//! once no node still needs its images.
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`: delete events handled 5 s late, builds of seconds).
//!
//! Each test starts its own control plane and guard(s) and stops them when it ends.

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

use support::guard::{Guard, register_mutating_webhook, register_validating_webhook};
use support::mco;
use support::scenario::{Cluster, Rollout, create_mosc, create_pool, wait_for};
use support::simulator::SimConfig;
use support::steps::{
    DegradedWatch, STEP_TIMEOUT, assert_image_in_registry, check, events_about, guard_metrics,
    kubectl, run_cli, seed, wait_image_and_builds_gone, wait_index_holds_the_rolling_node,
    wait_pool_reverted, wait_rolled_out,
};

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";
/// The Lease lives in `default` here: the harness has no `mosc-guard` namespace.
const DEFER: &[&str] = &["--deletion-mode", "defer", "--lease-namespace", "default"];

/// Starts a defer-mode guard with `extra` arguments.
async fn defer_guard(cluster: &Cluster, extra: &[&str]) -> Guard {
    let args: Vec<&str> = DEFER.iter().chain(extra).copied().collect();
    Guard::start_with_args(&cluster.cp, &args)
        .await
        .expect("mosc-guard starts in defer mode")
}

/// Points both webhook configurations (rendered from manifests/) at `guard`.
async fn register_both(cluster: &Cluster, guard: &Guard) {
    register_validating_webhook(&cluster.cp, guard)
        .await
        .expect("validating webhook registered");
    register_mutating_webhook(&cluster.cp, guard)
        .await
        .expect("mutating webhook registered");
}

/// A seeded cluster with a defer-mode guard registered, and the report's steps 1-3 done.
async fn deferring(timing: SimConfig) -> (Cluster, Guard, Rollout) {
    let cluster = seed(timing).await;
    let guard = defer_guard(&cluster, &[]).await;
    register_both(&cluster, &guard).await;
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    (cluster, guard, rollout)
}

async fn mosc(cluster: &Cluster, name: &str) -> Option<DynamicObject> {
    mco::moscs(&cluster.client)
        .get_opt(name)
        .await
        .expect("read MachineOSConfig")
}

fn finalizers(obj: &DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

async fn wait_finalizer(cluster: &Cluster, name: &str) {
    wait_for(
        || async {
            let obj = mco::moscs(&cluster.client).get_opt(name).await?;
            Ok(obj
                .filter(|o| finalizers(o).iter().any(|f| f == FINALIZER))
                .map(|_| ()))
        },
        STEP_TIMEOUT,
        &format!("MachineOSConfig {name} to carry {FINALIZER}"),
    )
    .await
    .expect("finalizer added");
}

async fn wait_gone(cluster: &Cluster, name: &str, timeout: Duration) {
    wait_for(
        || async {
            let obj = mco::moscs(&cluster.client).get_opt(name).await?;
            Ok(obj.is_none().then_some(()))
        },
        timeout,
        &format!("MachineOSConfig {name} to be gone"),
    )
    .await
    .expect("MachineOSConfig deleted");
}

async fn events(cluster: &Cluster, name: &str, reason: &str) -> Vec<Event> {
    events_about(&cluster.client, "MachineOSConfig", name, reason).await
}

async fn wait_event(cluster: &Cluster, name: &str, reason: &str) -> Event {
    wait_for(
        || async { Ok(events(cluster, name, reason).await.into_iter().next()) },
        STEP_TIMEOUT,
        &format!("a {reason} Event about {name}"),
    )
    .await
    .expect("event recorded")
}

/// Waits until the guard reports (via /metrics) whether it leads.
async fn wait_leader(guard: &Guard, leader: bool, timeout: Duration) {
    let want = format!("mosc_guard_leader {}", i32::from(leader));
    wait_for(
        || async {
            let text = guard_metrics(guard).await?;
            Ok(text.lines().any(|l| l == want).then_some(()))
        },
        timeout,
        &format!("{} to report `{want}`", guard.base_url()),
    )
    .await
    .expect("leadership as expected");
}

/// `kubectl delete machineosconfig worker --wait=false` (+ `extra`) must succeed and print the
/// deferral warning naming the held node; returns kubectl's stderr.
async fn delete_deferred(cluster: &Cluster, rollout: &Rollout, extra: &[&str]) -> String {
    let mut args = vec!["delete", "machineosconfig", "worker", "--wait=false"];
    args.extend_from_slice(extra);
    let out = cluster.cp.kubectl(&args).await.expect("run kubectl delete");
    assert!(out.success(), "defer mode accepts the delete: {out:?}");
    let want = format!(
        "Warning: mosc-guard: deletion of machineosconfig \"worker\" deferred: 1 node still needs an image built from it ({}); it completes when the rollout settles",
        rollout.node
    );
    assert!(
        out.stderr.contains(&want),
        "missing {want:?} in {}",
        out.stderr
    );
    out.stderr
}

/// Asserts MachineOSConfig `worker` is Terminating (deletionTimestamp set) and still holds our
/// finalizer.
async fn assert_held(cluster: &Cluster) {
    let obj = mosc(cluster, "worker").await.expect("worker still exists");
    assert!(obj.metadata.deletion_timestamp.is_some(), "Terminating");
    assert!(
        finalizers(&obj).iter().any(|f| f == FINALIZER),
        "held by {FINALIZER}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_is_deferred_until_the_rollout_settles() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let image = rollout.build.image_ref().expect("image reference");
    assert!(
        finalizers(&mosc(&cluster, "worker").await.expect("worker"))
            .contains(&FINALIZER.to_string()),
        "the mutating webhook added the finalizer on create"
    );
    // The cache has seen the rolling node, so the warning names it.
    wait_index_holds_the_rolling_node(&guard).await;

    // Step 4 of the report: the delete returns at once with the warning.
    delete_deferred(&cluster, &rollout, &[]).await;
    assert_held(&cluster).await;

    // Stripping the finalizer by hand (a common runbook step for a stuck object) would complete
    // the deletion now: it is decided as the deletion, and refused.
    let out = kubectl(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "worker",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
        ],
    )
    .await;
    assert!(!out.success(), "{out:?}");
    for want in [
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        "This update removes the finalizer mosc-guard.dev/wait-for-rollout",
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?} in {}",
            out.stderr
        );
    }
    assert_held(&cluster).await;
    let event = wait_event(&cluster, "worker", "DeletionDeferred").await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains(&rollout.node),
        "the Event names the node: {note}"
    );
    let (code, stdout, _) = check(&cluster, "machineosconfig/worker", &[]);
    assert_eq!(code, 1, "check still says unsafe: {stdout}");

    // While the node is held nothing is released, the image stays and the builds stay.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_held(&cluster).await;
    assert_image_in_registry(&cluster, &image).await;
    assert_eq!(
        events(&cluster, "worker", "DeletionDeferred").await.len(),
        1,
        "one Event per set of blocking nodes, not one per requeue"
    );
    let metrics = guard_metrics(&guard).await.expect("metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l == "mosc_guard_deferred_deletions 1"),
        "{metrics}"
    );
    // The oldest deferred deletion's deletionTimestamp, which the alert ages.
    let since = mosc(&cluster, "worker")
        .await
        .and_then(|m| m.metadata.deletion_timestamp)
        .expect("deletionTimestamp")
        .0
        .as_second();
    let want = format!("mosc_guard_oldest_deferred_deletion_timestamp_seconds {since}");
    assert!(
        metrics.lines().any(|l| l == want),
        "missing {want:?} in\n{metrics}"
    );

    // MCO keeps rolling (it ignores deletionTimestamp). The next node is caught mid-update too:
    // the set of blocking nodes changed, so a new Event names it (an Event keyed without its
    // note would only recount the first one, still naming the first node).
    let second = cluster.nodes[1].clone();
    cluster.sim.hold(&second);
    cluster.sim.release(&rollout.node);
    let renamed = wait_for(
        || async {
            Ok(events(&cluster, "worker", "DeletionDeferred")
                .await
                .into_iter()
                .find(|e| e.note.as_deref().unwrap_or_default().contains(&second)))
        },
        STEP_TIMEOUT,
        "a DeletionDeferred Event naming the second node",
    )
    .await
    .expect("Event for the new set of blocking nodes");
    assert!(
        !renamed.note.unwrap_or_default().contains(&rollout.node),
        "the first node is no longer blocking"
    );
    assert_held(&cluster).await;

    // The finalizer goes once every node is on the image and the pool stops Updating; then MCO
    // deletes images and builds and reverts the pool.
    cluster.sim.release(&second);
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    wait_event(&cluster, "worker", "DeletionReleased").await;
    wait_image_and_builds_gone(&cluster, &image).await;
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");

    let metrics = guard_metrics(&guard).await.expect("metrics");
    for want in [
        "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"deferred\"} 1",
        "mosc_guard_finalizer_releases_total{reason=\"settled\"} 1",
        "mosc_guard_deferred_deletion_duration_seconds_count 1",
        "mosc_guard_mutations_total{result=\"added\"}",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
    for want in [
        "mosc_guard_leader 1",
        "mosc_guard_deferred_deletions 0",
        "mosc_guard_oldest_deferred_deletion_timestamp_seconds 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == want),
            "missing {want:?} in\n{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mosc_created_before_the_guard_gets_the_finalizer_at_start_up() {
    let cluster = seed(SimConfig::real_timing()).await;
    create_mosc(&cluster.client, "worker", &cluster.push_spec())
        .await
        .expect("create MOSC");

    // Draining (--no-new-finalizers): the controller leads but adds nothing.
    let mut draining = defer_guard(&cluster, &["--no-new-finalizers"]).await;
    wait_leader(&draining, true, STEP_TIMEOUT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let obj = mosc(&cluster, "worker").await.expect("worker");
    assert!(
        finalizers(&obj).is_empty(),
        "--no-new-finalizers adds none: {obj:?}"
    );
    draining.stop();

    // A normal start adopts it without anything touching the object.
    let guard = defer_guard(&cluster, &["--log-format", "json"]).await;
    wait_finalizer(&cluster, "worker").await;

    // --log-format json: every line is one JSON object, with the event's fields.
    let log = guard.log_tail(500);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "added the finalizer"
                && l["fields"]["name"] == "worker"
                && l["level"] == "INFO"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_resumes_and_releases() {
    let (cluster, mut guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    delete_deferred(&cluster, &rollout, &[]).await;
    wait_event(&cluster, "worker", "DeletionDeferred").await;

    // mosc-guard goes away mid-deferral; the rollout completes meanwhile.
    guard.stop();
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    assert_held(&cluster).await;

    // A new process (new port: the webhooks are pointed at it) resumes and releases.
    let guard = defer_guard(&cluster, &[]).await;
    register_both(&cluster, &guard).await;
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_one_leads_and_the_other_takes_over() {
    let cluster = seed(SimConfig::real_timing()).await;
    let mut first = defer_guard(&cluster, &["--identity", "replica-a"]).await;
    wait_leader(&first, true, STEP_TIMEOUT).await;
    let second = defer_guard(&cluster, &["--identity", "replica-b"]).await;
    // The API server calls the second replica; the first only runs the controller.
    register_both(&cluster, &second).await;
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_leader(&second, false, Duration::from_secs(1)).await;
    wait_leader(&first, true, Duration::from_secs(1)).await;

    delete_deferred(&cluster, &rollout, &[]).await;
    wait_event(&cluster, "worker", "DeletionDeferred").await;

    // The leader dies without giving the Lease up; the other replica takes over.
    first.kill();
    let killed = std::time::Instant::now();
    wait_leader(&second, true, Duration::from_secs(30)).await;
    let took = killed.elapsed();
    eprintln!("takeover after {took:.1?}");
    assert!(
        took >= Duration::from_secs(5),
        "a live Lease must not be taken over early ({took:.1?})"
    );
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "default");
    let lease = leases.get("mosc-guard").await.expect("lease");
    let spec = lease.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(spec.lease_transitions, Some(1));

    cluster.sim.release(&rollout.node);
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    let released = wait_event(&cluster, "worker", "DeletionReleased").await;
    assert_eq!(
        released.reporting_instance.as_deref(),
        Some("replica-b"),
        "released by the new leader"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_cascade_waits_for_the_builds_then_the_whole_tree_goes() {
    // Builds take seconds (as real ones take minutes), so the garbage collector finishes the
    // foreground deletion before MCO has rebuilt a deleted MachineOSBuild.
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    delete_deferred(&cluster, &rollout, &["--cascade=foreground"]).await;

    // The garbage collector's MOSB deletes are refused while the node needs the image.
    wait_for(
        || async {
            let text = guard_metrics(&guard).await?;
            Ok(text
                .contains("mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"denied\"}")
                .then_some(()))
        },
        STEP_TIMEOUT,
        "the garbage collector's MachineOSBuild delete to be denied",
    )
    .await
    .expect("MOSB delete denied");
    let builds = support::scenario::mosbs_of(&cluster.client, "worker")
        .await
        .expect("list builds");
    assert!(
        builds
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some(rollout.build.mosb.as_str())),
        "the build is still there"
    );
    assert_held(&cluster).await;

    cluster.sim.release(&rollout.node);
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    wait_for(
        || async {
            let builds = support::scenario::mosbs_of(&cluster.client, "worker").await?;
            Ok(builds.is_empty().then_some(()))
        },
        STEP_TIMEOUT,
        "the MachineOSBuilds to be gone",
    )
    .await
    .expect("builds deleted");
    wait_pool_reverted(&cluster).await;
    assert!(!watch.ever_degraded(), "the pool was never Degraded");
    // Whether MCO deleted the image depends on whether it saw the MOSC still there when it
    // handled the build's deletion (4.20's in-use check then keeps the image every node runs,
    // a leak) or already gone (no check): both are 4.20 behaviour, and both are safe here
    // because every node had reached the image before the build could go.
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_finalizers_leaves_no_mosc_with_the_finalizer() {
    let (cluster, mut guard, rollout) = deferring(SimConfig::real_timing()).await;
    // A second, idle pool and MachineOSConfig (no nodes): protected, never deleted.
    create_pool(&cluster.client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("create pool infra");
    create_mosc(&cluster.client, "infra", &cluster.push_spec())
        .await
        .expect("create MOSC infra");
    wait_finalizer(&cluster, "infra").await;
    delete_deferred(&cluster, &rollout, &[]).await;

    // With the mutating webhook still registered, the finalizer comes straight back.
    let (code, stdout, stderr) = run_cli(&cluster, &["release-finalizers"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("machineosconfig/infra: the finalizer came back"),
        "{stdout}"
    );

    // Uninstall order: webhook configurations first, then the guard, then release-finalizers.
    let out = kubectl(
        &cluster,
        ["delete", "mutatingwebhookconfiguration", "mosc-guard"],
    )
    .await;
    assert!(out.success(), "{out:?}");
    support::guard::unregister_validating_webhook(&cluster.cp)
        .await
        .expect("unregister");
    guard.stop();
    let (code, stdout, stderr) = run_cli(&cluster, &["release-finalizers"]);
    assert_eq!(
        code, 1,
        "a deletion still deferred is kept: {stdout}{stderr}"
    );
    assert!(
        stdout.contains("released machineosconfig/infra"),
        "{stdout}"
    );
    assert!(
        stdout.contains("kept machineosconfig/worker: deletion of machineosconfig \"worker\" deferred: 1 node still needs"),
        "{stdout}"
    );
    assert!(stdout.contains("--force"), "{stdout}");

    // Once the rollout settles, the same command releases the rest and exits 0.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    let (code, stdout, stderr) = run_cli(&cluster, &["release-finalizers"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("released machineosconfig/worker"),
        "{stdout}"
    );
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    let left = mco::list_all(&mco::moscs(&cluster.client))
        .await
        .expect("list");
    assert!(
        left.iter()
            .all(|m| !finalizers(m).iter().any(|f| f == FINALIZER)),
        "no MachineOSConfig keeps the finalizer: {left:?}"
    );
    let (code, stdout, _) = run_cli(&cluster, &["release-finalizers"]);
    assert_eq!(
        (code, stdout.trim()),
        (0, "no MachineOSConfig carries the finalizer")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutating_webhook_adds_one_finalizer_and_restores_it() {
    let cluster = seed(SimConfig::real_timing()).await;
    // A pool without nodes: the simulator builds, but no node ever needs the image.
    create_pool(&cluster.client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("create pool infra");
    let guard = defer_guard(&cluster, &[]).await;
    register_both(&cluster, &guard).await;
    let manifest = serde_json::to_string(&json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": "infra", "finalizers": ["example.com/keep"]},
        "spec": {
            "machineConfigPool": {"name": "infra"},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": cluster.push_spec(),
            "containerFile": [{"containerfileArch": "NoArch", "content": "FROM configs AS final\n"}]
        }
    }))
    .expect("json");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mosc.json");
    std::fs::write(&file, &manifest).expect("write manifest");
    let file = file.to_string_lossy().into_owned();
    for _ in 0..2 {
        let out = kubectl(&cluster, ["apply", "-f", &file]).await;
        assert!(out.success(), "{out:?}");
    }
    let obj = mosc(&cluster, "infra").await.expect("infra");
    assert_eq!(
        finalizers(&obj),
        vec!["example.com/keep".to_string(), FINALIZER.to_string()],
        "applied twice: our finalizer once, the other one kept"
    );

    // Removing it by hand from a live object: the webhook puts it back in the same request.
    let both = format!(r#"["example.com/keep","{FINALIZER}"]"#);
    let after = finalizers_after(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "infra",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/1"}]"#,
        ],
    )
    .await;
    assert_eq!(after, both);

    // A write that leaves the finalizer alone is let through untouched. The test makes this write
    // itself: the simulator's own annotation lands only when the build ends, which on a slow
    // machine is after the deletion below.
    let after = finalizers_after(
        &cluster,
        [
            "annotate",
            "machineosconfig",
            "infra",
            "example.com/touched=yes",
        ],
    )
    .await;
    assert_eq!(after, both);

    // An object being deleted is left alone: clearing its finalizers is not undone.
    mco::moscs(&cluster.client)
        .delete("infra", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let after = finalizers_after(
        &cluster,
        [
            "patch",
            "machineosconfig",
            "infra",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    )
    .await;
    assert!(
        !after.contains(FINALIZER),
        "not re-added while terminating: {after:?}"
    );
    wait_gone(&cluster, "infra", STEP_TIMEOUT).await;
    let metrics = guard_metrics(&guard).await.expect("metrics");
    for want in [
        "mosc_guard_mutations_total{result=\"added\"}",
        "mosc_guard_mutations_total{result=\"present\"}",
        "mosc_guard_mutations_total{result=\"terminating\"}",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
}

/// Runs a kubectl write and returns the finalizers of the object it wrote, as the API server
/// stored them (after the mutating webhook).
async fn finalizers_after<const N: usize>(cluster: &Cluster, args: [&str; N]) -> String {
    let mut with_output: Vec<&str> = args.to_vec();
    with_output.extend(["-o", "jsonpath={.metadata.finalizers}"]);
    let out = cluster.cp.kubectl(with_output).await.expect("kubectl runs");
    assert!(out.success(), "{out:?}");
    out.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_finalizers_force_lets_a_held_deletion_go_on_record() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    delete_deferred(&cluster, &rollout, &[]).await;

    // With the webhooks still registered, the forced release passes the validating webhook only
    // because it records the override annotation in the same patch.
    let (code, stdout, stderr) = run_cli(&cluster, &["release-finalizers", "--force"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("released machineosconfig/worker"),
        "{stdout}"
    );
    wait_gone(&cluster, "worker", STEP_TIMEOUT).await;
    let log = guard.log_tail(300);
    assert!(
        log.lines().any(|l| l.contains("admission decision")
            && l.contains("name=worker")
            && l.contains("override_reason=\"mosc-guard release-finalizers --force\"")
            && l.contains("result=overridden")),
        "{log}"
    );
}
