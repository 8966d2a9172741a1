//! `hack/gather` (docs/gather.md, "Collecting data for support") against the test control
//! plane with the real `/usr/bin/kubectl` (the script's `oc` is not installed here; it runs the
//! same commands with either): mid-rollout and again once the pool has settled, `mosc-guard
//! check --all --builds --from-dir <gathered>` gives the verdicts `check --all --builds` gives
//! live, and so does `check worker`; the files it promises are there (the guard's Lease and
//! Events, the webhook configuration, every MCO kind `check` reads); a kind the cluster does
//! not serve is named in errors.txt, exit status 1, and the dump is then refused as incomplete
//! rather than decided on. On a pool the bug degraded, `mosc-guard recover --from-dir
//! <gathered>` gives the plan `recover` gives live (the dump holds the full nodes and the
//! MachineConfigs' names, without their contents). Pod logs are collected by the same loop for each pod, but the test
//! control plane runs no pods (no scheduler, no kubelet), so none is checked here.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use testkit::guard::GuardBin;
use testkit::scenario::*;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs `hack/gather DIR` as an admin would, with kubectl and the control plane's kubeconfig;
/// (exit status, stderr).
fn gather(cluster: &Cluster, dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(Path::new(ROOT).join("hack/gather"))
        .arg(dir)
        .env("KUBECTL", "/usr/bin/kubectl")
        .env("KUBECONFIG", cluster.cp.kubeconfig())
        .env("MOSC_GUARD", BIN.path())
        .env_remove("NAMESPACE")
        .output()
        .expect("run hack/gather");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

/// The verdicts of a `check ... -o json` run: the report(s) without their warnings (a dump's
/// notes about skipped files, an API the cluster does not serve), which name the source.
fn verdicts(json: &Value) -> Value {
    let strip = |r: &Value| {
        let mut r = r.clone();
        r.as_object_mut().expect("a report").remove("warnings");
        r
    };
    match json {
        Value::Array(reports) => Value::Array(reports.iter().map(strip).collect()),
        report => strip(report),
    }
}

/// A recovery plan without what only the registry's answer decides: whether the registry was
/// asked differs by design (live it is asked, a dump without `--authfile` is not), the plan
/// must not.
fn recovery_plan(json: &Value) -> Value {
    let mut plan = verdicts(json);
    let Some(report) = plan.as_object_mut() else {
        return plan;
    };
    for nodes in report.values_mut().filter_map(Value::as_array_mut) {
        for node in nodes.iter_mut().filter_map(Value::as_object_mut) {
            node.remove("registry");
            if let Some(why) = node.get_mut("why").and_then(Value::as_array_mut) {
                why.retain(|w| {
                    !w.as_str()
                        .is_some_and(|w| w.starts_with("the loss was not verified"))
                });
            }
        }
    }
    plan
}

/// Gathers into a new directory and checks the dump against the live cluster.
fn gather_and_compare(cluster: &Cluster, want_code: i32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = gather(cluster, dir.path());
    assert_eq!(code, Some(0), "hack/gather: {stderr}");
    for (args, code) in [
        (&["check", "--all", "--builds", "-o", "json"][..], want_code),
        (&["check", "worker", "-o", "json"][..], want_code),
    ] {
        let live = cluster.run_cli(&BIN, args);
        assert_eq!(live.code, Some(code), "live {args:?}: {live:?}");
        let mut offline_args = args.to_vec();
        let from = dir.path().to_string_lossy().into_owned();
        offline_args.extend(["--from-dir", &from]);
        let offline = BIN.cli().args(&offline_args).run();
        assert_eq!(
            offline.code, live.code,
            "from the dump {offline_args:?}: {offline:?}"
        );
        assert_eq!(
            verdicts(&offline.json()),
            verdicts(&live.json()),
            "{args:?}: the dump gives the live verdicts"
        );
    }
    // The live verdict at gather time is recorded beside the dump.
    let recorded =
        std::fs::read_to_string(dir.path().join("mosc-guard-check.out")).expect("recorded");
    let recorded: Value = serde_json::from_str(&recorded).expect("JSON");
    let live = cluster.run_cli(&BIN, &["check", "--all", "--builds", "-o", "json"]);
    assert_eq!(verdicts(&recorded), verdicts(&live.json()));
    dir
}

fn list_kinds(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    assert_eq!(list["kind"], "List", "{}", path.display());
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["kind"].as_str().unwrap_or(""),
                i["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gathered_dump_gives_the_live_verdicts() {
    let cluster = seed(SimConfig::fast()).await;
    // The guard's namespace, so its Lease is there to collect (the harness starts it outside
    // the cluster, with the default Lease namespace mosc-guard).
    let out = kubectl(&cluster, ["create", "namespace", "mosc-guard"]).await;
    assert!(out.success(), "{out:?}");
    let guard = registered_guard(&BIN, &cluster, &[]).await;
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("rollout held mid-update");
    // A refusal, so there is a DeletionBlocked Event to collect.
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "{out:?}");
    wait_for(
        || async {
            let lease = kubectl(&cluster, ["get", "lease", "-n", "mosc-guard", "mosc-guard"]).await;
            let events = events_about(
                &cluster.client,
                "MachineOSConfig",
                "worker",
                "DeletionBlocked",
            )
            .await;
            Ok((lease.success() && !events.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "the guard's Lease and a DeletionBlocked Event",
    )
    .await
    .expect("lease and event");

    let dir = gather_and_compare(&cluster, 1);
    let d = dir.path();
    let c = d.join("cluster-scoped-resources");
    assert!(list_kinds(&c.join("core/nodes.yaml")).len() >= 3);
    assert_eq!(
        list_kinds(&c.join("machineconfiguration.openshift.io/machineosconfigs.yaml")),
        vec!["MachineOSConfig/worker".to_owned()]
    );
    assert!(
        list_kinds(&c.join("machineconfiguration.openshift.io/machineosbuilds.yaml"))
            .contains(&format!("MachineOSBuild/{}", rollout.build.mosb))
    );
    assert!(
        list_kinds(&c.join("machineconfiguration.openshift.io/machineconfigpools.yaml"))
            .contains(&"MachineConfigPool/worker".to_owned())
    );
    assert_eq!(
        list_kinds(&c.join("config.openshift.io/clusterversions.yaml")),
        vec!["ClusterVersion/version".to_owned()]
    );
    list_kinds(&d.join("namespaces/all/machine.openshift.io/machines.yaml"));
    let webhook = std::fs::read_to_string(
        c.join("admissionregistration.k8s.io/validatingwebhookconfiguration-mosc-guard.yaml"),
    )
    .expect("webhook configuration");
    assert!(webhook.contains("deletions.mosc-guard.dev"), "{webhook}");
    assert_eq!(
        list_kinds(&d.join("namespaces/mosc-guard/coordination.k8s.io/leases.yaml")),
        vec!["Lease/mosc-guard".to_owned()]
    );
    let events = list_kinds(&d.join("namespaces/default/core/events-MachineOSConfig.yaml"));
    assert!(!events.is_empty(), "the DeletionBlocked Event");
    assert!(!d.join("errors.txt").exists(), "nothing failed");
    assert!(
        std::fs::read_to_string(d.join("gather.txt"))
            .expect("gather.txt")
            .contains("kubectl")
    );
    // No Secret and no ConfigMap was read.
    let all = walk(d);
    assert!(
        all.iter().all(|(_, text)| !text.contains("kind: Secret")),
        "no Secret"
    );

    // Settled: the dump and the live cluster now both say safe.
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    wait_for(
        || async { Ok((cluster.check(&BIN, "worker", &[]).code == Some(0)).then_some(())) },
        STEP_TIMEOUT,
        "check worker exit 0",
    )
    .await
    .expect("settled");
    let _settled = gather_and_compare(&cluster, 0);

    // A kind the cluster does not serve: named in errors.txt, exit 1, and the dump without
    // pools is refused as incomplete instead of decided on.
    cluster
        .cp
        .remove_crd("machineconfigpools.machineconfiguration.openshift.io")
        .await
        .expect("remove the pool CRD");
    let broken = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = gather(&cluster, broken.path());
    assert_eq!(code, Some(1), "{stderr}");
    let errors = std::fs::read_to_string(broken.path().join("errors.txt")).expect("errors.txt");
    assert!(errors.contains("machineconfigpools"), "{errors}");
    assert!(
        !broken
            .path()
            .join(
                "cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigpools.yaml"
            )
            .exists(),
        "no half-written file"
    );
    let from = broken.path().to_string_lossy().into_owned();
    let run = BIN
        .cli()
        .args(["check", "worker", "--from-dir", &from])
        .run();
    assert_eq!(run.code, Some(2), "nodes but no pools: incomplete: {run:?}");
    drop(guard);
}

/// Every file below `dir` with its text (non-UTF-8 skipped).
fn walk(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gathered_dump_gives_the_live_recovery_plan() {
    let cluster = seed(SimConfig::fast()).await;
    let stuck = lose_the_image(&cluster, "worker", &cluster.nodes[0]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = gather(&cluster, dir.path());
    assert_eq!(code, Some(0), "hack/gather: {stderr}");

    // This control plane has no ControllerConfig, and a dump holds no credentials: neither
    // run can ask the registry, so both say the admin verified the loss (recover_cli's
    // registry tests cover the asking).
    let verified = "--image-loss-verified";
    let live = cluster.run_cli(&BIN, &["recover", "-o", "json", verified]);
    assert_eq!(live.code, Some(0), "{live:?}");
    let from = dir.path().to_string_lossy().into_owned();
    let offline = BIN
        .cli()
        .args(["recover", "-o", "json", verified, "--from-dir", &from])
        .run();
    assert_eq!(offline.code, live.code, "{offline:?}");
    assert_eq!(
        recovery_plan(&offline.json()),
        recovery_plan(&live.json()),
        "the dump gives the live plan"
    );
    let plan = live.json();
    assert_eq!(
        plan["recoverable"][0]["node"],
        stuck.node.as_str(),
        "{plan:#}"
    );

    // The MachineConfigs by name only: every rendered one's content holds the pull secret.
    let configs = dir
        .path()
        .join("cluster-scoped-resources/machineconfiguration.openshift.io/machineconfigs.yaml");
    let mut names = list_kinds(&configs);
    names.sort();
    assert!(
        names.contains(&format!("MachineConfig/{}", rendered_config("worker"))),
        "{names:?}"
    );
    let text = std::fs::read_to_string(&configs).expect("machineconfigs.yaml");
    assert!(
        !text.contains("spec") && !text.contains("ignition"),
        "{text}"
    );
}
