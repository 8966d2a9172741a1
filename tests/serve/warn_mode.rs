//! Seeing before enforcing: warn mode as an overlay, and what shows what is unsafe right now.
//!
//! - `manifests/overlays/openshift-warn` renders as `overlays/openshift` with one more
//!   argument, `--enforcement=warn` (appended once), and nothing else changed.
//! - A guard with `--enforcement warn` registered with a real API server, a MachineOSConfig
//!   whose first node is held mid-update (the report's steps 1-3): `kubectl delete` is admitted,
//!   kubectl prints the guard's warnings, the guard counts it as
//!   `mosc_guard_admission_decisions_total{result="would-deny"}` and records a
//!   `DeletionWouldBeBlocked` Warning Event. (The pool then degrades, as without mosc-guard:
//!   warn mode protects nothing.)
//! - `mosc-guard check --all` live, against the same kind of cluster: the MachineOSConfig and
//!   (with `--builds`) its build are unsafe while the node is held, safe once the pool has
//!   settled; and the guard's `mosc_guard_deletion_blocked{machineosconfig,reason}` gauge says
//!   the same, 1 with `reason="node"`, then 0 with `reason="none"`.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use testkit::guard::{Guard, GuardBin};
use testkit::manifests::render;
use testkit::scenario::*;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

fn deployment_args(objects: &[Value]) -> Vec<String> {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_owned())
        .collect()
}

#[test]
fn the_warn_overlay_is_the_openshift_overlay_plus_enforcement_warn() {
    let warn = render("overlays/openshift-warn").unwrap_or_else(|e| panic!("{e}"));
    let deny = render("overlays/openshift").unwrap_or_else(|e| panic!("{e}"));
    let mut want = deployment_args(&deny);
    assert!(
        !want.iter().any(|a| a.starts_with("--enforcement")),
        "{want:?}"
    );
    want.push("--enforcement=warn".to_owned());
    assert_eq!(deployment_args(&warn), want);
    assert!(
        !deployment_args(&warn)
            .iter()
            .any(|a| a.starts_with("--deletion-mode")),
        "warn mode is deny mode's only"
    );
    // Everything else is the openshift overlay's, object for object.
    let strip = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .map(|o| {
                let mut o = o.clone();
                if o["kind"] == "Deployment" {
                    o["spec"]["template"]["spec"]["containers"][0]["args"] = json!(null);
                }
                o
            })
            .collect()
    };
    assert_eq!(strip(&warn), strip(&deny));
    // The component alone adds nothing but the argument: no MutatingWebhookConfiguration.
    assert!(
        !warn
            .iter()
            .any(|o| o["kind"] == "MutatingWebhookConfiguration")
    );
}

async fn wait_metric(guard: &Guard, series: &str, want: f64) -> String {
    wait_for(
        || async {
            let text = guard.metrics().await?;
            let got = testkit::probe::metric(&text, series);
            Ok((got == Some(want)).then_some(text))
        },
        STEP_TIMEOUT,
        &format!("{series} == {want}"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_in_warn_mode_admits_warns_counts_and_records() {
    let g = guarded(&BIN, SimConfig::fast(), &["--enforcement", "warn"]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    wait_index_holds_the_rolling_node(&g.guard).await;
    // Enforced, this deletion would be refused (check agrees).
    let run = cluster.check(&BIN, "machineosconfig/worker", &[]);
    assert_eq!(run.code, Some(1), "{run:?}");

    let out = kubectl(
        cluster,
        ["delete", "machineosconfig", "worker", "--wait=false"],
    )
    .await;
    assert!(out.success(), "warn mode admits the deletion: {out:?}");
    for want in [
        "Warning: mosc-guard (--enforcement warn): this deletion would have been refused; it was admitted",
        "Warning: mosc-guard: machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.",
        rollout.node.as_str(),
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?} in kubectl's stderr:\n{}",
            out.stderr
        );
    }
    assert!(
        out.stdout
            .contains("machineosconfig.machineconfiguration.openshift.io \"worker\" deleted"),
        "{out:?}"
    );
    let metrics = wait_metric(
        &g.guard,
        "mosc_guard_admission_decisions_total{resource=\"machineosconfigs\",result=\"would-deny\"}",
        1.0,
    )
    .await;
    assert!(
        !metrics.contains("result=\"denied\""),
        "nothing was denied:\n{metrics}"
    );
    let events = wait_for_events_about(
        &cluster.client,
        "MachineOSConfig",
        "worker",
        "DeletionWouldBeBlocked",
        STEP_TIMEOUT,
    )
    .await
    .expect("Event recorded");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"), "{events:?}");
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(&rollout.node),
        "the Event names the node: {events:?}"
    );
    assert!(
        events_about(
            &cluster.client,
            "MachineOSConfig",
            "worker",
            "DeletionBlocked"
        )
        .await
        .is_empty(),
        "no DeletionBlocked Event: nothing was refused"
    );
    let log = g.guard.log();
    assert!(
        log.lines()
            .any(|l| l.contains("admission decision") && l.contains("result=would-deny")),
        "{log}"
    );
    wait_mosc_gone(&cluster.client, "worker").await;
}

/// `check --all [--builds] -o json` against the live control plane: (exit status, verdict of
/// each `Kind/name`).
fn check_all(cluster: &Cluster, builds: bool) -> (Option<i32>, Vec<(String, bool)>) {
    let mut args = vec!["check", "--all", "-o", "json"];
    if builds {
        args.push("--builds");
    }
    let run = cluster.run_cli(&BIN, &args);
    let reports = run.json();
    let verdicts = reports
        .as_array()
        .unwrap_or_else(|| panic!("a JSON array: {run:?}"))
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["target"]["kind"].as_str().expect("kind"),
                    r["target"]["name"].as_str().expect("name")
                ),
                r["allowed"].as_bool().expect("allowed"),
            )
        })
        .collect();
    (run.code, verdicts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_all_and_the_blocked_gauge_follow_the_rollout() {
    let g = guarded(&BIN, SimConfig::fast(), &[]).await;
    let (cluster, rollout) = (&g.cluster, &g.rollout);
    let mosb = format!("MachineOSBuild/{}", rollout.build.mosb);

    // Mid-rollout: every MachineOSConfig (here the one) and its build are unsafe to delete.
    let (code, verdicts) = check_all(cluster, false);
    assert_eq!(code, Some(1), "{verdicts:?}");
    assert_eq!(verdicts, vec![("MachineOSConfig/worker".to_owned(), false)]);
    let (code, verdicts) = check_all(cluster, true);
    assert_eq!(code, Some(1));
    let kinds: BTreeSet<(String, bool)> = verdicts.into_iter().collect();
    assert_eq!(
        kinds,
        [
            ("MachineOSConfig/worker".to_owned(), false),
            (mosb.clone(), false)
        ]
        .into(),
    );
    let text = cluster.run_cli(&BIN, &["check", "--all", "--builds"]);
    assert_eq!(text.code, Some(1), "{text:?}");
    let header = text.stdout.lines().next().unwrap_or_default();
    for column in ["KIND", "NAME", "DELETE", "WHY"] {
        assert!(header.contains(column), "{text:?}");
    }
    assert!(
        text.stdout.contains("worker") && text.stdout.contains(&rollout.build.mosb),
        "{text:?}"
    );
    assert!(
        text.stdout.contains(&rollout.node),
        "WHY names the node: {text:?}"
    );
    // The gauge: 1, a node still needs the image.
    wait_metric(
        &g.guard,
        "mosc_guard_deletion_blocked{machineosconfig=\"worker\",reason=\"node\"}",
        1.0,
    )
    .await;

    // Settled: all safe, and the gauge says so with reason none (the node series is gone).
    cluster.sim.release(&rollout.node);
    wait_rolled_out(cluster, &rollout.build.image).await;
    let metrics = wait_metric(
        &g.guard,
        "mosc_guard_deletion_blocked{machineosconfig=\"worker\",reason=\"none\"}",
        0.0,
    )
    .await;
    assert!(
        !metrics
            .contains("mosc_guard_deletion_blocked{machineosconfig=\"worker\",reason=\"node\"}"),
        "the blocked series is replaced:\n{metrics}"
    );
    let (code, verdicts) = wait_for(
        || async {
            let (code, verdicts) = check_all(cluster, true);
            Ok((code == Some(0)).then_some((code, verdicts)))
        },
        STEP_TIMEOUT,
        "check --all --builds exit 0",
    )
    .await
    .expect("settled");
    assert_eq!(code, Some(0));
    assert!(verdicts.iter().all(|(_, allowed)| *allowed), "{verdicts:?}");
    assert!(verdicts.iter().any(|(k, _)| k == &mosb), "{verdicts:?}");
    // The guard agrees: the deletion goes through.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let out = kubectl(
        cluster,
        ["delete", "machineosconfig", "worker", "--dry-run=server"],
    )
    .await;
    assert!(out.success(), "{out:?}");
}
