//! Chaos end to end (issue 12, item 2), on the real control plane, registry, MCO 4.20 simulator
//! and mosc-guard process, each case in the middle of the report's rollout (the first worker
//! held mid-update to the new image):
//!
//! - (a) kube-apiserver killed (SIGKILL) and restarted on the same port;
//! - (b) etcd killed and restarted on the same data directory;
//! - (c) the guard cut off from the API server (its kubeconfig goes through a forwarder that
//!   black-holes every connection) for `MOSC_GUARD_CHAOS_OUTAGE_SECS` (default 10; `make soak`
//!   30);
//! - (d) defer mode with two replicas, the leader SIGKILLed while a deletion is deferred.
//!
//! Each asserts: deletions attempted during the fault fail closed (never allowed while a node
//! needs the image; an allow that cannot be confirmed is refused), readiness and metrics say
//! what happened, the same guard process (same pid) serves correct allows and denials
//! afterwards, no pool degrades, and the deletion completes once the rollout settles (no
//! finalizer stranded). Each prints one `chaos <case>:` line with what it observed; recovery
//! times are figures, not assertions.
//!
//! The simulator runs at `SimConfig::fast()` (milliseconds): the faults are under test, not
//! the machine-os-builder's timing.

mod support;

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, DynamicObject};

use support::guard::{Guard, register_mutating_webhook, register_validating_webhook};
use support::mco;
use support::scenario::{Cluster, Rollout, create_mosc, create_pool, wait_for, wait_for_build};
use support::simulator::SimConfig;
use support::steps::{
    DegradedWatch, STEP_TIMEOUT, events_about, guard_metrics, metric, mosc_delete_review,
    post_review, readyz, seed, wait_pool_reverted, wait_rolled_out,
};

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";
/// A cache whose watch fails this long makes the guard unready (the default is 30 s); the
/// Lease lives in `default` (the harness has no `mosc-guard` namespace).
const ARGS: &[&str] = &["--stale-after=5", "--lease-namespace=default"];

fn outage() -> Duration {
    let secs = std::env::var("MOSC_GUARD_CHAOS_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

/// The report's rollout with a guard in front, plus pool `infra` with a built MOSC and no
/// nodes: deleting MOSC `worker` must be refused, deleting MOSC `infra` is safe (an allow that
/// needs the confirming fresh read).
struct Setup {
    cluster: Cluster,
    rollout: Rollout,
    watch: DegradedWatch,
}

async fn layered_cluster() -> (Cluster, DegradedWatch) {
    let cluster = seed(SimConfig::fast()).await;
    create_pool(&cluster.client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("create pool infra");
    create_mosc(&cluster.client, "infra", &cluster.push_spec())
        .await
        .expect("create MOSC infra");
    wait_for_build(&cluster.client, "infra", STEP_TIMEOUT)
        .await
        .expect("infra built");
    let watch = DegradedWatch::start(&cluster.client, "worker");
    (cluster, watch)
}

async fn rollout(cluster: Cluster, watch: DegradedWatch) -> Setup {
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    Setup {
        cluster,
        rollout,
        watch,
    }
}

async fn mosc(cluster: &Cluster, name: &str) -> DynamicObject {
    mco::moscs(&cluster.client)
        .get(name)
        .await
        .expect("read MachineOSConfig")
}

/// A server-side dry run of deleting MOSC `name` as the admin: `Ok` if admitted, else the
/// message (a refusal, or the API server's own error).
async fn dry_run_delete(cluster: &Cluster, name: &str) -> Result<(), String> {
    let params = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let api = mco::moscs(&cluster.client);
    let call = api.delete(name, &params);
    match tokio::time::timeout(Duration::from_secs(30), call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 30 s".into()),
    }
}

/// Both answers as they should be on a healthy cluster mid-rollout: worker refused naming the
/// held node, infra allowed.
async fn assert_decides_correctly(setup: &Setup) {
    let refused = dry_run_delete(&setup.cluster, "worker")
        .await
        .expect_err("worker is refused while its node is mid-update");
    assert!(
        refused.contains("cannot be deleted yet") && refused.contains(&setup.rollout.node),
        "{refused}"
    );
    dry_run_delete(&setup.cluster, "infra")
        .await
        .expect("infra (no node needs it) is allowed");
}

/// Reviews posted to the guard directly while the API server cannot be asked: both must be
/// refused (worker from the cache; infra because the allow cannot be confirmed).
async fn assert_direct_reviews_fail_closed(
    guard: &Guard,
    worker: &DynamicObject,
    infra: &DynamicObject,
) -> Vec<String> {
    let mut seen = Vec::new();
    for (i, obj) in [worker, infra].into_iter().enumerate() {
        let old = serde_json::to_value(obj).expect("json");
        let review = mosc_delete_review(&format!("chaos-{i}"), &old);
        let (allowed, message) = post_review(guard, &review)
            .await
            .expect("the guard answers");
        assert!(!allowed, "allowed during the outage: {message}");
        seen.push(first_line(&message));
    }
    seen
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(160)
        .collect()
}

/// Waits until /readyz answers `status`; returns its body and how long it took.
async fn wait_readyz(guard: &Guard, status: u16, timeout: Duration) -> (String, Duration) {
    let started = Instant::now();
    let body = wait_for(
        || async {
            Ok(readyz(guard)
                .await
                .filter(|(s, _)| *s == status)
                .map(|(_, body)| body))
        },
        timeout,
        &format!("/readyz {status}"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    (body, started.elapsed())
}

/// The stale caches /metrics names (`mosc_guard_cache_stale{cache="..."} 1`).
fn stale_caches(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("mosc_guard_cache_stale{") && l.ends_with(" 1"))
        .filter_map(|l| l.split('"').nth(1).map(str::to_owned))
        .collect()
}

fn failed_confirmations(metrics: &str) -> f64 {
    metric(metrics, "mosc_guard_confirmations_total{result=\"failed\"}").unwrap_or(0.0)
}

/// The end of every case: the node reaches the image, the rollout settles, MOSC worker is
/// deleted for real and the pool leaves image mode, never Degraded. Returns how long after the
/// rollout settled the guard let the deletion through: a cache that has not caught up yet
/// (its watch still in backoff after the fault) refuses for a moment, which is safe.
async fn finish(setup: &Setup) -> Duration {
    setup.cluster.sim.release(&setup.rollout.node);
    wait_rolled_out(&setup.cluster, &setup.rollout.build.image).await;
    let settled = Instant::now();
    let mut last = None;
    while settled.elapsed() < Duration::from_secs(120) {
        let out = setup
            .cluster
            .cp
            .kubectl(["delete", "machineosconfig", "worker"])
            .await
            .expect("kubectl");
        if out.success() {
            last = None;
            break;
        }
        last = Some(out);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(last.is_none(), "settled: the delete goes through: {last:?}");
    let took = settled.elapsed();
    wait_pool_reverted(&setup.cluster).await;
    assert!(!setup.watch.ever_degraded(), "pool worker degraded");
    assert_eq!(setup.cluster.sim.rejected_writes(), Vec::<String>::new());
    took
}

/// Cases (a) and (b): a control-plane process dies mid-rollout and comes back.
async fn control_plane_restart(which: &str) {
    let (cluster, watch) = layered_cluster().await;
    let guard = Guard::start_with_args(&cluster.cp, ARGS)
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("webhook registered");
    let setup = rollout(cluster, watch).await;
    let cluster = &setup.cluster;
    assert_decides_correctly(&setup).await;
    let (worker, infra) = (mosc(cluster, "worker").await, mosc(cluster, "infra").await);
    let pid = guard.pid();
    let failed_before = failed_confirmations(&guard_metrics(&guard).await.expect("metrics"));

    let down = outage();
    match which {
        "apiserver" => cluster.cp.kill_apiserver(),
        _ => cluster.cp.kill_etcd(),
    }
    let killed = Instant::now();
    // Straight away and once the caches had time to go stale: refused either way.
    let mut during = assert_direct_reviews_fail_closed(&guard, &worker, &infra).await;
    if which == "etcd" {
        // The API server is up: an admin's deletion through it must not go through either.
        let through = dry_run_delete(cluster, "infra").await;
        assert!(
            through.is_err(),
            "a deletion was admitted while etcd was down"
        );
        during.push(format!(
            "through the API server: {}",
            first_line(&through.unwrap_err())
        ));
    }
    let mut unready: Option<(String, Vec<String>)> = None;
    while killed.elapsed() < down {
        if unready.is_none()
            && let Some((503, body)) = readyz(&guard).await
        {
            let metrics = guard_metrics(&guard).await.unwrap_or_default();
            unready = Some((body, stale_caches(&metrics)));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    during.extend(assert_direct_reviews_fail_closed(&guard, &worker, &infra).await);
    let metrics = guard_metrics(&guard).await.expect("metrics");
    let failed_during = failed_confirmations(&metrics) - failed_before;
    let ready_gauge = metric(&metrics, "mosc_guard_ready");
    assert!(
        failed_during >= 1.0,
        "the unconfirmable allows are counted: {metrics}"
    );

    let back_in = match which {
        "apiserver" => cluster.cp.start_apiserver_again().await,
        _ => cluster.cp.start_etcd_again().await,
    }
    .expect("control plane back");
    let (_, recovered) = wait_readyz(&guard, 200, Duration::from_secs(120)).await;
    assert_eq!(guard.pid(), pid, "the same process recovered");
    let metrics = guard_metrics(&guard).await.expect("metrics");
    assert_eq!(stale_caches(&metrics), Vec::<String>::new());
    assert_eq!(metric(&metrics, "mosc_guard_ready"), Some(1.0));
    // The next answers are correct again (retrying while the watches and the API server's own
    // caches catch up: a refusal saying "could not verify" right after the restart is fine).
    wait_for(
        || async { Ok(dry_run_delete(cluster, "infra").await.ok()) },
        STEP_TIMEOUT,
        "infra's deletion to be allowed again",
    )
    .await
    .expect("allows resume");
    assert_decides_correctly(&setup).await;
    let allowed_after = finish(&setup).await;
    let (readyz_during, stale_during) = unready
        .map(|(b, s)| (format!("503 {:?}", first_line(&b.replace('\n', " "))), s))
        .unwrap_or_else(|| ("200 throughout".to_owned(), Vec::new()));
    println!(
        "chaos {which}-restart: down {:.1}s, back in {back_in:.1?}; during: /readyz {readyz_during}, \
         stale caches {stale_during:?}, mosc_guard_ready at the end of the outage {ready_gauge:?}, \
         confirmations failed +{failed_during}, refusals {during:?}; guard ready again {recovered:.1?} \
         after the {which} served, same pid {pid}; the settled deletion allowed {allowed_after:.1?} \
         after the rollout settled; no pool degraded",
        down.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_killed_mid_rollout() {
    control_plane_restart("apiserver").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarted_mid_rollout() {
    control_plane_restart("etcd").await;
}

/// How the guard's route to the API server fails in case (c).
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Connections are refused (reset at once).
    Refuse,
    /// Connections are accepted and never answered (packets dropped).
    BlackHole,
}

/// Case (c), refused: the guard's connections to the API server fail at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_refused_by_the_api_server() {
    guard_cut_off(Cut::Refuse).await;
}

/// Case (c), black-holed: the guard's connections to the API server hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_black_holed_from_the_api_server() {
    guard_cut_off(Cut::BlackHole).await;
}

/// Case (c): the guard cannot reach the API server; everything else can.
async fn guard_cut_off(how: Cut) {
    let (cluster, watch) = layered_cluster().await;
    let api_server: std::net::SocketAddr = cluster
        .cp
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("API server address");
    let forwarder = support::forwarder::Forwarder::start(api_server)
        .await
        .expect("forwarder");
    let kubeconfig =
        support::users::admin_kubeconfig_via(&cluster.cp, cluster.cp.dir(), &forwarder.https_url())
            .expect("kubeconfig");
    let guard = Guard::start_as(&cluster.cp, &kubeconfig, ARGS)
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("webhook registered");
    let setup = rollout(cluster, watch).await;
    let cluster = &setup.cluster;
    assert_decides_correctly(&setup).await;
    let pid = guard.pid();
    let failed_before = failed_confirmations(&guard_metrics(&guard).await.expect("metrics"));

    let down = outage();
    match how {
        Cut::BlackHole => forwarder.set_black_hole(true),
        Cut::Refuse => {
            // Port 1 on loopback: nothing listens.
            forwarder.set_target("127.0.0.1:1".parse().expect("address"));
            forwarder.cut_connections();
        }
    }
    let cut = Instant::now();
    // Deletions through the API server meanwhile: worker refused from the cache, infra refused
    // because the confirming read cannot reach the API server.
    let mut during = Vec::new();
    let mut unready: Option<(String, Vec<String>, Duration)> = None;
    // Every watch fails from the cut on, so within --stale-after plus a probe's bound (5 s
    // each) every cache must be reported stale.
    let check_at = down.min(Duration::from_secs(15));
    let mut at_check = None;
    let mut attempts = 0;
    while cut.elapsed() < down || attempts == 0 {
        for name in ["worker", "infra"] {
            let answer = dry_run_delete(cluster, name).await;
            let refused = answer.expect_err("no deletion is allowed while the guard is cut off");
            during.push(format!("{name}: {}", first_line(&refused)));
        }
        attempts += 1;
        if unready.is_none()
            && let Some((503, body)) = readyz(&guard).await
        {
            let metrics = guard_metrics(&guard).await.unwrap_or_default();
            unready = Some((body, stale_caches(&metrics), cut.elapsed()));
        }
        if at_check.is_none() && cut.elapsed() >= check_at {
            at_check = Some(readiness_now(&guard, cut).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let at_check = match at_check {
        Some(c) => c,
        None => readiness_now(&guard, cut).await,
    };
    let metrics = guard_metrics(&guard).await.expect("metrics");
    let failed_during = failed_confirmations(&metrics) - failed_before;
    let ready_gauge = metric(&metrics, "mosc_guard_ready");
    assert!(failed_during >= 1.0, "{metrics}");
    let (body, stale, unready_after) = unready.unwrap_or_else(|| {
        panic!(
            "/readyz stayed 200 for {down:?} without the API server\n{}",
            guard.log_tail(40)
        )
    });
    assert!(!stale.is_empty(), "the metrics name the stale caches");
    assert!(
        stale.iter().all(|c| body.contains(c.as_str())),
        "/readyz names them: {body}"
    );
    let (status_end, body_end, stale_end, checked_after) = at_check;
    let mut all = stale_end.clone();
    all.sort();
    assert_eq!(
        (status_end, all),
        (
            503,
            [
                "machineconfigpools",
                "machineosbuilds",
                "machineosconfigs",
                "nodes"
            ]
            .map(String::from)
            .to_vec()
        ),
        "{checked_after:.0?} without the API server every cache is stale: /readyz {body_end}\n{}",
        guard.log_tail(30)
    );

    match how {
        Cut::BlackHole => forwarder.set_black_hole(false),
        Cut::Refuse => forwarder.set_target(api_server),
    }
    let (_, recovered) = wait_readyz(&guard, 200, Duration::from_secs(120)).await;
    assert_eq!(guard.pid(), pid, "the same process recovered");
    let metrics = guard_metrics(&guard).await.expect("metrics");
    assert_eq!(stale_caches(&metrics), Vec::<String>::new());
    assert_eq!(metric(&metrics, "mosc_guard_ready"), Some(1.0));
    assert_decides_correctly(&setup).await;
    let allowed_after = finish(&setup).await;
    let kinds: std::collections::BTreeSet<String> = during
        .iter()
        .map(|d| {
            if d.contains("could not verify") {
                format!("{}: could not verify", &d[..d.find(':').unwrap_or(0)])
            } else if d.contains("cannot be deleted yet") {
                format!("{}: cannot be deleted yet", &d[..d.find(':').unwrap_or(0)])
            } else {
                d.clone()
            }
        })
        .collect();
    println!(
        "chaos guard-cut-off ({how:?}): {:.1}s, {attempts} rounds of deletions refused ({kinds:?}); \
         /readyz 503 after {unready_after:.1?} naming {stale:?} ({:?}), after {checked_after:.0?} {stale_end:?}, \
         mosc_guard_ready {ready_gauge:?}, \
         confirmations failed +{failed_during}; ready again {recovered:.1?} after the route came back, \
         same pid {pid}; the settled deletion allowed {allowed_after:.1?} after the rollout settled; \
         no pool degraded",
        cut.elapsed().as_secs_f64(),
        first_line(&body.replace('\n', " "))
    );
}

/// /readyz status and body, and the stale caches /metrics names, now.
async fn readiness_now(guard: &Guard, since: Instant) -> (u16, String, Vec<String>, Duration) {
    let at = since.elapsed();
    let (status, body) = readyz(guard).await.unwrap_or_default();
    let metrics = guard_metrics(guard).await.unwrap_or_default();
    (status, body, stale_caches(&metrics), at)
}

/// Waits until the guard reports (via /metrics) whether it leads.
/// Waits until `guard` exports one deferred deletion whose deletionTimestamp is `since`.
async fn wait_deferred_gauges(guard: &Guard, since: f64, what: &str) {
    wait_for(
        || async {
            let m = guard_metrics(guard).await?;
            Ok((metric(&m, "mosc_guard_deferred_deletions") == Some(1.0)
                && metric(&m, "mosc_guard_oldest_deferred_deletion_timestamp_seconds")
                    == Some(since))
            .then_some(()))
        },
        STEP_TIMEOUT,
        what,
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

async fn wait_leader(guard: &Guard, leader: bool, timeout: Duration) -> Duration {
    let started = Instant::now();
    let want = if leader { 1.0 } else { 0.0 };
    wait_for(
        || async {
            let text = guard_metrics(guard).await?;
            Ok((metric(&text, "mosc_guard_leader") == Some(want)).then_some(()))
        },
        timeout,
        &format!("{} to report mosc_guard_leader {want}", guard.base_url()),
    )
    .await
    .expect("leadership as expected");
    started.elapsed()
}

/// Case (d): defer mode, two replicas; the leader dies while a deletion is deferred, and the
/// other replica releases it once the rollout settles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_leader_killed_while_a_deletion_is_deferred() {
    let defer = ["--deletion-mode", "defer", "--lease-namespace", "default"];
    let (cluster, watch) = layered_cluster().await;
    let args = |id: &'static str| -> Vec<&'static str> {
        defer.iter().copied().chain(["--identity", id]).collect()
    };
    let mut leader = Guard::start_with_args(&cluster.cp, &args("replica-a"))
        .await
        .expect("replica a");
    wait_leader(&leader, true, STEP_TIMEOUT).await;
    let survivor = Guard::start_with_args(&cluster.cp, &args("replica-b"))
        .await
        .expect("replica b");
    // The API server calls replica b; replica a leads and runs the finalizer controller.
    register_validating_webhook(&cluster.cp, &survivor)
        .await
        .expect("validating webhook");
    register_mutating_webhook(&cluster.cp, &survivor)
        .await
        .expect("mutating webhook");
    let setup = rollout(cluster, watch).await;
    let cluster = &setup.cluster;
    let pid = survivor.pid();

    let out = cluster
        .cp
        .kubectl(["delete", "machineosconfig", "worker", "--wait=false"])
        .await
        .expect("kubectl");
    assert!(out.success() && out.stderr.contains("deferred"), "{out:?}");
    let since = mosc(cluster, "worker")
        .await
        .metadata
        .deletion_timestamp
        .expect("Terminating")
        .0
        .as_second() as f64;
    let oldest = "mosc_guard_oldest_deferred_deletion_timestamp_seconds";
    wait_deferred_gauges(
        &leader,
        since,
        "the leader to export the deferred deletion and its deletionTimestamp",
    )
    .await;
    let m = guard_metrics(&survivor).await.expect("metrics");
    assert_eq!(metric(&m, "mosc_guard_leader"), Some(0.0));
    assert_eq!(metric(&m, oldest), Some(0.0), "only the leader reports");

    // The leader dies without giving the Lease up, while the deletion is deferred.
    leader.kill();
    let took_over = wait_leader(&survivor, true, Duration::from_secs(60)).await;
    wait_deferred_gauges(
        &survivor,
        since,
        "the new leader to export the same deletionTimestamp",
    )
    .await;
    let held = mosc(cluster, "worker").await;
    assert!(
        held.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER),
        "still held while the node needs the image"
    );

    // The rollout settles; the survivor releases the finalizer, MCO cleans up.
    setup.cluster.sim.release(&setup.rollout.node);
    let released_at = Instant::now();
    wait_for(
        || async {
            Ok(mco::moscs(&cluster.client)
                .get_opt("worker")
                .await?
                .is_none()
                .then_some(()))
        },
        STEP_TIMEOUT,
        "MOSC worker to be gone",
    )
    .await
    .expect("deferred deletion completes");
    let completed = released_at.elapsed();
    let released = events_about(
        &cluster.client,
        "MachineOSConfig",
        "worker",
        "DeletionReleased",
    )
    .await;
    assert!(
        released
            .iter()
            .any(|e| e.reporting_instance.as_deref() == Some("replica-b")),
        "released by the surviving replica: {released:?}"
    );
    wait_pool_reverted(cluster).await;
    assert!(!setup.watch.ever_degraded(), "pool worker degraded");
    assert_eq!(cluster.sim.rejected_writes(), Vec::<String>::new());
    assert_eq!(survivor.pid(), pid);
    let m = guard_metrics(&survivor).await.expect("metrics");
    assert_eq!(metric(&m, "mosc_guard_deferred_deletions"), Some(0.0));
    assert_eq!(metric(&m, oldest), Some(0.0));
    assert_eq!(
        metric(
            &m,
            "mosc_guard_finalizer_releases_total{reason=\"settled\"}"
        ),
        Some(1.0)
    );
    let left = mco::list_all(&mco::moscs(&cluster.client))
        .await
        .expect("list");
    assert!(
        left.iter().all(|m| !m
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
            || m.metadata.deletion_timestamp.is_none()),
        "no deletion left held: {left:?}"
    );
    println!(
        "chaos defer-leader-killed: replica b led {took_over:.1?} after the SIGKILL and exported the \
         same oldest deferred deletionTimestamp ({since}); the deletion completed {completed:.1?} \
         after the node was released, released by replica-b (pid {pid}, never restarted); no pool \
         degraded; mosc_guard_deferred_deletions 0, finalizer releases (settled) 1"
    );
}
