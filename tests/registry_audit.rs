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

use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use testkit::guard::{Guard, GuardBin};
use testkit::manifests::render;
use testkit::mco::STATE;
use testkit::node_registry::{NODE_PASSWORD, SecureFace};
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

    let events = wait_for(
        || async {
            let found = events_about(
                &cluster.client,
                "MachineOSConfig",
                "worker",
                "NeededImageMissing",
            )
            .await;
            Ok((!found.is_empty()).then_some(found))
        },
        STEP_TIMEOUT,
        "a NeededImageMissing Event about worker",
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
