//! `serve`'s registry audit end to end: a real API server (with the ControllerConfig and
//! ImageDigestMirrorSet test CRDs), the MCO simulator, a real registry, the guard binary.
//!
//! The report's steps 1-3 (the first worker held mid-update to a new image), with the registry
//! nodes pull from behind TLS and token auth (`Registry::secure_front`, same storage) and the
//! ControllerConfig holding what nodes pull with: its pull secret, the registry's CA as a
//! per-host bundle (`..` for `:`). An ImageDigestMirrorSet with `NeverContactSource` sends pulls
//! of the simulator's registry to the secure face, and the simulator's daemon pulls as a node
//! does (`SimConfig::pulling_as_node`: the same ControllerConfig and mirror set, HTTPS, token). Then the image is deleted behind everyone's back, as a
//! retention policy would: the guard's gauge turns to 1, the shipped alert (promtool, on the
//! guard's real /metrics) fires critical, a `NeededImageMissing` Event is on the
//! MachineOSConfig, all while the node has not failed yet; released, the node fails.
//!
//! And the audit's count of the images `prune` would delete
//! (`mosc_guard_deletable_images{machineosconfig}`), listed with the nodes' pull secret: the
//! MachineOSConfig pushes to the secure face itself (as to a production registry), MCO's push
//! secret exists for `prune` only. The count follows the registry and the nodes, equals what
//! `prune -o json` lists as deletable each time, and goes (unknown) while the nodes' credentials
//! are refused, whatever the push secret could do.

use std::collections::BTreeSet;

use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use testkit::guard::{Guard, GuardBin};
use testkit::manifests::render;
use testkit::mco::STATE;
use testkit::node_registry::{NODE_PASSWORD, PUSH_PASSWORD, SecureFace};
use testkit::release::Release;
use testkit::scenario::*;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const PENDING_MISSING: &str =
    "mosc_guard_needed_images{pool=\"worker\",need=\"pending\",status=\"missing\"}";

async fn wait_metric(guard: &Guard, series: &str, want: f64) -> String {
    wait_for(
        || async {
            let text = guard.metrics().await?;
            Ok((testkit::probe::metric(&text, series) == Some(want)).then_some(text))
        },
        STEP_TIMEOUT,
        &format!("{series} == {want}"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the shipped rules (the openshift overlay's PrometheusRule) with promtool over the
/// guard's own `mosc_guard_needed_images` samples (as the platform Prometheus would scrape
/// them, with its job, namespace and pod labels) and returns promtool's verdict on an
/// expectation that the critical alert fires for pool worker.
fn promtool_fires(metrics: &str) -> (bool, String) {
    let objects = render("overlays/openshift").unwrap_or_else(|e| panic!("{e}"));
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    let critical = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .find(|r| {
            r["alert"] == "MoscGuardNeededImageMissing" && r["labels"]["severity"] == "critical"
        })
        .expect("the critical rule");
    let description = critical["annotations"]["description"]
        .as_str()
        .expect("description")
        .replace("{{ $value }}", "1")
        .replace("{{ $labels.pool }}", "worker");
    let series: Vec<Value> = metrics
        .lines()
        .filter(|l| l.starts_with("mosc_guard_needed_images{"))
        .map(|l| {
            let (name_labels, value) = l.rsplit_once(' ').expect("a sample");
            let with_scrape_labels = name_labels.replacen(
                '{',
                "{job=\"mosc-guard\",namespace=\"mosc-guard\",pod=\"guard-0\",",
                1,
            );
            json!({"series": with_scrape_labels, "values": format!("{value}x10")})
        })
        .collect();
    assert!(
        !series.is_empty(),
        "no needed-images samples in:\n{metrics}"
    );
    let test = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{
                "eval_time": "1m",
                "alertname": "MoscGuardNeededImageMissing",
                "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "namespace": "mosc-guard", "pool": "worker"},
                    "exp_annotations": {
                        "runbook_url": critical["annotations"]["runbook_url"],
                        "summary": critical["annotations"]["summary"],
                        "description": description,
                    }
                }]
            }]
        }]
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = serde_yaml_ng::to_string(&json!({"groups": rule["spec"]["groups"]})).expect("yaml");
    std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules");
    std::fs::write(
        dir.path().join("real.test.yaml"),
        serde_yaml_ng::to_string(&test).expect("yaml"),
    )
    .expect("write test");
    let out = std::process::Command::new("promtool")
        .args(["test", "rules", "real.test.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool (Debian package prometheus; make deps installs it)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_fires_before_the_node_that_needs_a_deleted_image_fails() {
    let g = guarded(
        &BIN,
        SimConfig::fast().pulling_as_node(),
        &["--registry-check-interval", "3"],
    )
    .await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    // The guard's namespace, where its Lease lives: the Lease holder writes the audit's Events.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "mosc-guard"}}))
                .expect("namespace"),
        )
        .await
        .expect("create namespace mosc-guard");
    let secure = SecureFace::for_nodes(&cluster.client, &cluster.registry)
        .await
        .expect("the registry as nodes reach it");

    // `check` (live) on the config: refused (the node still needs the image), and the image is
    // still served, so no note.
    let served = cluster.check(&BIN, "machineosconfig/worker", &["-o", "json"]);
    assert_eq!(served.code, Some(1), "{served:?}");
    assert_eq!(
        served.json()["registry"][0]["status"],
        "available",
        "{served:?}"
    );

    // Served: the gauge says no image is missing, and the audit has asked.
    let before = wait_metric(&g.guard, PENDING_MISSING, 0.0).await;
    wait_for(
        || async {
            let text = g.guard.metrics().await?;
            let served = testkit::probe::metric(
                &text,
                "mosc_guard_registry_checks_total{result=\"available\"}",
            );
            Ok(served.is_some_and(|n| n >= 1.0).then_some(()))
        },
        STEP_TIMEOUT,
        "the audit found the image available",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{before}"));

    // A retention policy deletes the tag's digest behind everyone's back.
    let image = rollout.build.image_ref().expect("image reference");
    let digest = image.digest.clone().expect("digest");
    assert!(
        cluster
            .registry
            .delete_manifest(&image.repo, &digest)
            .await
            .expect("delete")
    );
    let metrics = wait_metric(&g.guard, PENDING_MISSING, 1.0).await;
    let (fires, out) = promtool_fires(&metrics);
    assert!(
        fires,
        "the shipped rule on the guard's metrics:\n{out}\n{metrics}"
    );

    let events = wait_for_events_about(
        &cluster.client,
        "MachineOSConfig",
        "worker",
        "NeededImageMissing",
        STEP_TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", g.guard.log_tail(40)));
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains(&rollout.node) && note.contains("missing"),
        "{note}"
    );
    assert!(!note.contains(NODE_PASSWORD) && !metrics.contains(NODE_PASSWORD));
    assert!(
        !g.guard.log().contains(NODE_PASSWORD),
        "the log holds no credential"
    );

    // `check` now says the image it protects is already gone; the verdict is the same.
    let gone = cluster.check(&BIN, "machineosconfig/worker", &[]);
    assert_eq!(gone.code, Some(1), "{gone:?}");
    assert!(
        gone.stdout.contains("is already gone from its registry"),
        "{gone:?}"
    );
    let quiet = cluster.check(
        &BIN,
        "machineosconfig/worker",
        &["--no-registry", "-o", "json"],
    );
    assert!(quiet.json().get("registry").is_none(), "{quiet:?}");

    // All of that before the node has failed: it is still Working on its way to the image.
    let state = node_annotation(&cluster.client, &rollout.node, STATE)
        .await
        .expect("read node");
    assert_eq!(
        state.as_deref(),
        Some("Working"),
        "the node has not failed yet"
    );

    // Released, the node pulls as a node does (the mirror, with its pull secret and CA) and
    // fails as the alert said it would.
    cluster.sim.release(&rollout.node);
    wait_node_degraded(cluster).await;
    let reason = node_annotation(&cluster.client, &rollout.node, testkit::mco::REASON)
        .await
        .expect("read node")
        .unwrap_or_default();
    assert!(
        reason.contains("manifest unknown") && reason.contains(secure.host()),
        "the node failed on the registry the guard asked: {reason}"
    );
}

const WORKER_IMAGES: &str = "mosc_guard_deletable_images{machineosconfig=\"worker\"}";
const WORKER_UNKNOWN: &str = "mosc_guard_deletable_images_unknown{machineosconfig=\"worker\"}";
const TAGS_RESOLVED: &str = "mosc_guard_registry_tags_resolved_total";

/// The metrics once two more counts of the deletable images have finished: the second started
/// after this call, so it saw the registry and the caches as they are now.
async fn after_two_counts(guard: &Guard) -> String {
    for _ in 0..2 {
        let before = guard.metric(TAGS_RESOLVED).await.unwrap_or(0.0);
        wait_for(
            || async {
                let now = guard.metric(TAGS_RESOLVED).await.unwrap_or(0.0);
                Ok((now > before).then_some(()))
            },
            STEP_TIMEOUT,
            "a count of the deletable images",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    }
    guard.metrics().await.expect("metrics")
}

/// `mosc-guard prune -o json` as the admin (with MCO's push secret): the digests it lists as
/// deletable, and (tag, deletable, reasons) of every tag.
async fn prune_lists(cluster: &Cluster) -> (BTreeSet<String>, Vec<(String, bool, Value)>) {
    let run = BIN
        .cli()
        .args(["prune", "--keep-younger-than", "0s", "-o", "json"])
        .kubeconfig(cluster.cp.kubeconfig())
        .run_async()
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains(PUSH_PASSWORD), "{run:?}");
    let report = run.json();
    assert_eq!(report["imageRepositories"][0]["listed"], true, "{report:#}");
    let images = report["images"].as_array().expect("images[]");
    let deletable = images
        .iter()
        .filter(|i| i["deletable"] == true)
        .map(|i| i["digest"].as_str().expect("digest").to_string())
        .collect();
    let mut tags: Vec<(String, bool, Value)> = images
        .iter()
        .map(|i| {
            (
                i["tag"].as_str().expect("tag").to_string(),
                i["deletable"] == true,
                i["reasons"].clone(),
            )
        })
        .collect();
    tags.sort_by(|a, b| a.0.cmp(&b.0));
    (deletable, tags)
}

/// The gauge after two more counts, which must equal `want` and what `prune` lists.
async fn counted(g: &Guard, cluster: &Cluster, want: usize) -> Vec<(String, bool, Value)> {
    let metrics = after_two_counts(g).await;
    let (deletable, tags) = prune_lists(cluster).await;
    assert_eq!(deletable.len(), want, "prune lists {tags:?}");
    assert_eq!(
        testkit::probe::metric(&metrics, WORKER_IMAGES),
        Some(want as f64),
        "the audit counts what prune lists ({tags:?}):\n{metrics}"
    );
    assert_eq!(testkit::probe::metric(&metrics, WORKER_UNKNOWN), Some(0.0));
    tags
}

/// 4.23, MachineOSConfig worker pushing to the registry behind TLS and token auth, the guard's
/// audit every 3 s. A tag pushed by hand is counted; build A deleted while its nodes run its
/// image (the pool paused before B rolls out): MCO's in-use check leaks A's image, whose tag no
/// build names, and it is not counted while the nodes run it. With a wrong password for the
/// nodes' user in the ControllerConfig (MCO's push secret still right) there is no count and
/// the unknown gauge is 1; with the right one the count is back. Unpaused, the nodes move to B
/// and A's leaked image is counted too. Each count equals `prune`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_counts_the_images_prune_would_delete_with_the_nodes_pull_secret() {
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let face = cluster
        .registry_behind_tls(true)
        .await
        .expect("secure registry");
    face.install_push_secret(&cluster.client, "push-secret")
        .await
        .expect("MCO's push secret, for prune");
    let g = registered_guard(&BIN, &cluster, &["--registry-check-interval", "3"]).await;
    create_mosc(&cluster.client, "worker", &push_spec(face.host()))
        .await
        .expect("create MOSC");
    let a = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("first build");
    wait_rolled_out(&cluster, &a.image).await;
    assert!(
        counted(&g, &cluster, 0).await.is_empty(),
        "only the build's tag"
    );

    let stray = cluster
        .registry
        .push_image(OCB_REPO, "by-hand")
        .await
        .expect("push");
    let tags = counted(&g, &cluster, 1).await;
    assert_eq!(tags, [("by-hand".to_string(), true, json!([]))]);

    objects::set_pool_paused(&cluster.client, "worker", true)
        .await
        .expect("pause");
    testkit::scenario::render(&cluster, "rendered-worker-11111111111111111111111111111111").await;
    let b = wait_new_build(&cluster, &a.image).await;
    testkit::mco::mosbs(&cluster.client)
        .delete(&a.mosb, &DeleteParams::default())
        .await
        .expect("the guard lets A go: its nodes run it, none is on its way to it");
    wait_for(
        || async { Ok(cluster.sim.kept_images().contains(&a.image).then_some(())) },
        STEP_TIMEOUT,
        "MCO's in-use check to keep A's image",
    )
    .await
    .expect("A's image leaked");
    let tags = counted(&g, &cluster, 1).await;
    assert_eq!(
        tags,
        [
            ("by-hand".to_string(), true, json!([])),
            (a.mosb.clone(), false, json!(["nodeNeedsImage"])),
        ],
        "A's tag is listed and kept: the nodes run it"
    );

    // The nodes' credentials refused (the push secret still right): no count, unknown.
    let wrong = "WRONG-node-password-31";
    face.set_node_password(&cluster.client, wrong)
        .await
        .expect("wrong password");
    let metrics = wait_for(
        || async {
            let text = g.metrics().await?;
            let unknown = testkit::probe::metric(&text, WORKER_UNKNOWN) == Some(1.0);
            let count = testkit::probe::metric(&text, WORKER_IMAGES);
            Ok((unknown && count.is_none()).then_some(text))
        },
        STEP_TIMEOUT,
        "no count while the nodes' credentials are refused",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", g.log_tail(40)));
    let why = g
        .wait_log_line(
            &["cannot count the deletable images", "worker"],
            STEP_TIMEOUT,
        )
        .await
        .expect("the log says why");
    assert!(why.contains(face.host()), "{why}");
    face.set_node_password(&cluster.client, NODE_PASSWORD)
        .await
        .expect("right password");
    counted(&g, &cluster, 1).await;

    objects::set_pool_paused(&cluster.client, "worker", false)
        .await
        .expect("unpause");
    wait_rolled_out(&cluster, &b.image).await;
    let tags = counted(&g, &cluster, 2).await;
    assert_eq!(
        tags,
        [
            ("by-hand".to_string(), true, json!([])),
            (a.mosb.clone(), true, json!([])),
        ],
        "no node runs A any more"
    );
    assert!(
        cluster
            .registry
            .manifest_status(OCB_REPO, &stray)
            .await
            .expect("registry")
            .is_none(),
        "the audit deletes nothing"
    );
    let log = g.log();
    for secret in [NODE_PASSWORD, PUSH_PASSWORD, wrong] {
        assert!(
            !log.contains(secret) && !metrics.contains(secret),
            "{secret}"
        );
    }
    assert_mco_never_refused(&cluster);
}

/// An interval past what a deadline can add is a usage error at start, never a panic later in
/// the audit's loop.
#[test]
fn an_interval_longer_than_a_week_is_refused_at_start() {
    let out = std::process::Command::new(BIN.path())
        .args(["serve", "--registry-check-interval", "18446744073709551615"])
        .output()
        .expect("run mosc-guard");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--registry-check-interval"), "{stderr}");
}
