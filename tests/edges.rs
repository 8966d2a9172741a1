//! Edges of availability, the finalizer controller and uninstall, end to end on a real API
//! server (issue 10): what happens when the guard's own access, its watches or its process
//! lifetime go wrong, and when the uninstall command meets objects it may not touch.
//!
//! Each test starts its own control plane (and guard, where one is needed) and stops them.

mod support;

use std::process::Command;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use std::time::{Duration, Instant};

use support::controlplane::ControlPlane;
use support::mco;
use support::scenario::{create_mosc, wait_for};
use support::serve::ServeProcess;

const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// Creates MachineOSConfig `name` carrying mosc-guard's finalizer (as defer mode leaves it).
async fn mosc_with_finalizer(cp: &ControlPlane, name: &str) {
    create_mosc(&cp.client(), name, "registry.example:5000/ocb-image:latest")
        .await
        .expect("create MachineOSConfig");
    mco::moscs(&cp.client())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}})),
        )
        .await
        .expect("add the finalizer");
}

fn finalizers_of(obj: &kube::api::DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

/// `mosc-guard ARGS --kubeconfig KUBECONFIG`: (exit code, stdout, stderr).
fn run_as(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mosc-guard"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run mosc-guard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Item 5: a 403 on one MachineOSConfig does not abort the run. The user may read everything
/// but patch only `alpha` and `gamma`; `beta` (listed between them) is refused. The others are
/// released, the summary names `beta` and why, and the exit status says the run is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_finalizers_goes_on_past_a_forbidden_object_and_names_it() {
    let cp = ControlPlane::start().await.expect("control plane");
    for name in ["alpha", "beta", "gamma"] {
        mosc_with_finalizer(&cp, name).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = support::users::kubeconfig(&cp, "releaser", dir.path()).expect("kubeconfig");
    support::users::apply(
        &cp,
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: releaser}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds, machineconfigpools]
  verbs: [get, list]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs]
  resourceNames: [alpha, gamma]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: releaser}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: releaser}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: releaser}
"#,
    )
    .await
    .expect("RBAC");
    // RBAC takes effect through the API server's informer: wait until it lets the user patch.
    wait_for(
        || async {
            let out = cp
                .kubectl([
                    "auth",
                    "can-i",
                    "patch",
                    "machineosconfigs/gamma",
                    "--as",
                    "releaser",
                ])
                .await?;
            Ok(out.success().then_some(()))
        },
        Duration::from_secs(30),
        "RBAC for the releaser",
    )
    .await
    .expect("RBAC in effect");

    let (code, stdout, stderr) = run_as(&kubeconfig, &["release-finalizers"]);
    assert_eq!(code, 2, "an object could not be released: {stdout}{stderr}");
    assert!(
        stdout.contains("released machineosconfig/alpha"),
        "{stdout}"
    );
    assert!(
        stdout.contains("released machineosconfig/gamma"),
        "the run went on after beta: {stdout}{stderr}"
    );
    let beta_line = stdout
        .lines()
        .find(|l| l.starts_with("could not release machineosconfig/beta: "))
        .unwrap_or_else(|| panic!("beta named with the reason: {stdout}{stderr}"));
    assert!(beta_line.contains("forbidden"), "{beta_line}");
    assert!(
        stderr.contains("could not release 1 MachineOSConfig(s): beta"),
        "{stderr}"
    );

    let moscs = mco::list_all(&mco::moscs(&cp.client()))
        .await
        .expect("list");
    let held: Vec<&str> = moscs
        .iter()
        .filter(|m| finalizers_of(m).iter().any(|f| f == FINALIZER))
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert_eq!(held, ["beta"], "only the forbidden one keeps the finalizer");
}

/// Item 8: request fields are user input (the override reason is set by whoever annotates the
/// object; name, uid and user come from whoever posts to /validate, which is not authenticated).
/// In the text log format, a reason and a name carrying newlines and ANSI escape sequences still
/// make exactly one `admission decision` line each, with no raw control character in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_request_cannot_forge_log_lines() {
    support::init_tracing();
    support::tls::ensure_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = support::pki::Pki::new(&dir.path().join("pki")).expect("pki");
    let cert = pki
        .server_cert("mosc-guard", &["127.0.0.1"])
        .expect("serving certificate");
    let port = support::net::free_port().expect("port");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/settled-lists");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mosc-guard"));
    cmd.args([
        "serve",
        "--from-dir",
        fixtures,
        "--log-format",
        "text",
        "--shutdown-delay",
        "0",
    ])
    .arg("--listen")
    .arg(format!("127.0.0.1:{port}"))
    .arg("--tls-cert-file")
    .arg(&cert.cert)
    .arg("--tls-key-file")
    .arg(&cert.key)
    .env("RUST_LOG", "info");
    let log = dir.path().join("mosc-guard.log");
    let mut guard = support::process::ChildProcess::spawn("mosc-guard", cmd, &log)
        .expect("spawn")
        .with_stop_grace(Duration::from_secs(15));
    let https = support::tls::https_client(&pki.ca_pem()).expect("client");
    let base = format!("https://127.0.0.1:{port}");
    guard
        .wait_ready(
            "GET /readyz",
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let (https, url) = (https.clone(), format!("{base}/readyz"));
                async move {
                    let status = https.get(url).send().await?.status();
                    if status.is_success() {
                        Ok(())
                    } else {
                        Err(format!("/readyz {status}").into())
                    }
                }
            },
        )
        .await
        .expect("ready");

    let forged = "\n2026-01-01T00:00:00Z  INFO mosc_guard::webhook::review: admission decision result=allowed";
    let reason = format!("maintenance\x1b[2K\x1b[1A\r{forged}\x1b[0m");
    let mosc = |name: &str| {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": name, "uid": "u-1",
                         "annotations": {"mosc-guard.dev/allow-deletion": reason}},
            "spec": {"machineConfigPool": {"name": "worker"},
                     "renderedImagePushSpec": "registry.example:5000/ocb-image:latest"}
        })
    };
    let g = "machineconfiguration.openshift.io";
    for (uid, name, user) in [
        ("uid-1", "worker".to_string(), "admin".to_string()),
        (
            "uid-2\n\x1b[31mforged",
            format!("worker{forged}"),
            format!("eve\x1b]0;title\x07{forged}"),
        ),
    ] {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": g, "version": "v1", "kind": "MachineOSConfig"},
                "resource": {"group": g, "version": "v1", "resource": "machineosconfigs"},
                "name": name,
                "operation": "DELETE",
                "userInfo": {"username": user},
                "oldObject": mosc(&name),
                "dryRun": true
            }
        });
        let resp = https
            .post(format!("{base}/validate"))
            .json(&review)
            .send()
            .await
            .expect("POST /validate");
        assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);
    }
    guard.stop();
    let text = std::fs::read_to_string(&log).expect("log");
    let decisions: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("admission decision"))
        .collect();
    assert_eq!(decisions.len(), 2, "one line per decision:\n{text}");
    assert!(
        !text.contains(['\x1b', '\x07', '\r']),
        "no raw control characters in the log:\n{text:?}"
    );
    assert!(
        decisions.iter().all(|l| l.contains("maintenance")),
        "the reason is still readable: {decisions:?}"
    );
}

/// A MachineOSConfig `name` as an admin writes it, optionally carrying mosc-guard's finalizer.
fn small_mosc(name: &str, finalizer: bool) -> kube::api::DynamicObject {
    let mut mosc = kube::api::DynamicObject::new(name, &mco::mosc_resource()).data(json!({
        "spec": {
            "machineConfigPool": {"name": name},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": "registry.example:5000/ocb-image:latest",
            "containerFile": [{"containerfileArch": "NoArch",
                               "content": "FROM configs AS final\nRUN dnf install -y cowsay\n"}],
        }
    }));
    if finalizer {
        mosc.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    }
    mosc
}

/// Grows MOSC `name` to about `bytes` of status: the 4.20 contract caps a containerfile at
/// 4 KiB (4 of them) and a condition message at 32 KiB, but not the number of conditions, so
/// conditions are where a MachineOSConfig can be large.
async fn grow_status(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    bytes: usize,
) -> Result<kube::api::DynamicObject, kube::Error> {
    const MESSAGE: usize = 32 * 1024;
    let line = "RUN dnf install -y cowsay && dnf clean all && echo done > /etc/motd\n";
    let conditions: Vec<serde_json::Value> = (0..bytes.div_ceil(MESSAGE))
        .map(|i| {
            let len = MESSAGE.min(bytes - i * MESSAGE);
            json!({"type": format!("BuildLog{i}"), "status": "True", "reason": "Logged",
                   "message": line.chars().cycle().take(len).collect::<String>(),
                   "lastTransitionTime": "2026-11-30T10:00:00Z"})
        })
        .collect();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await
}

/// Item 9: the release of the finalizer from the largest MachineOSConfig the API server
/// accepts is decided, not refused for its size. That UPDATE's review carries the object and
/// its oldObject (about twice the object's size), which exceeded the old 3 MiB body limit: the
/// webhook call failed and, with failurePolicy Fail, the release was refused.
///
/// etcd runs with a 3 MiB request limit (clusters raise etcd's 1.5 MiB default), so the bound
/// is the API server's own: its etcd client sends at most 2 MiB per request (found by search).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_mosc_can_have_its_finalizer_released() {
    let cp = ControlPlane::start_with_etcd_args(&["--max-request-bytes=3145728"])
        .await
        .expect("control plane");
    let api = mco::moscs(&cp.client());
    api.create(&kube::api::PostParams::default(), &small_mosc("big", true))
        .await
        .expect("create MachineOSConfig big");
    // Find the largest status the API server stores (to 16 KiB), before any webhook.
    let (mut ok, mut too_big) = (64 * 1024, 4 * 1024 * 1024);
    while too_big - ok > 16 * 1024 {
        let size = (ok + too_big) / 2;
        match grow_status(&api, "big", size).await {
            Ok(_) => ok = size,
            Err(e) => {
                tracing::info!("a {size}-byte status is refused: {e}");
                too_big = size;
            }
        }
    }
    grow_status(&api, "big", ok)
        .await
        .expect("the largest accepted status again");
    // Its size as the API server encodes it (Go's encoding/json writes '<', '>' and '&' as
    // six-byte escapes), which is what etcd limits and what a review carries.
    let json = serde_json::to_vec(&api.get("big").await.expect("get big")).expect("encode");
    let escapes = json
        .iter()
        .filter(|b| matches!(b, b'<' | b'>' | b'&'))
        .count();
    let stored = json.len() + 5 * escapes;
    tracing::info!("largest MachineOSConfig: {stored} bytes as the API server encodes it");
    assert!(
        2 * stored > 3 * 1024 * 1024,
        "two copies ({stored} bytes each) exceed the old limit, or this test proves nothing"
    );

    let guard = support::guard::Guard::start(&cp).await.expect("guard");
    support::guard::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    // Deleting it is allowed (it never built: no images), and the finalizer holds it.
    api.delete("big", &Default::default())
        .await
        .expect("delete is admitted");
    // Removing the finalizer from the object being deleted goes to the webhook as an UPDATE.
    let current = api.get("big").await.expect("get big");
    assert!(current.metadata.deletion_timestamp.is_some());
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]))
    .expect("patch");
    api.patch("big", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap_or_else(|e| panic!("the release is decided, not refused for its size: {e}"));
    wait_for(
        || async { Ok(api.get_opt("big").await?.is_none().then_some(())) },
        Duration::from_secs(30),
        "the large MachineOSConfig to be gone",
    )
    .await
    .expect("deleted");
    let log = guard.log_tail(400);
    assert!(
        log.lines().any(|l| l.contains("admission decision")
            && l.contains("name=big")
            && l.contains("result=allowed")),
        "the guard decided the release:\n{log}"
    );
}

/// Item 2: the finalizer controller starts only once every cache has synced (its decisions read
/// pools and MachineOSConfigs). With the MachineConfigPool CRD missing, the pool cache cannot
/// list: the guard leads (it holds the Lease) but adds no finalizer and says why; once the CRD
/// is back, the caches sync and the controller adopts the MachineOSConfig.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_controller_waits_for_the_caches_to_sync() {
    let cp = ControlPlane::start().await.expect("control plane");
    let crd = "machineconfigpools.machineconfiguration.openshift.io";
    let out = cp
        .kubectl(["delete", "crd", crd, "--wait=true"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");

    let mut guard = ServeProcess::spawn(
        &cp,
        cp.kubeconfig(),
        &["--deletion-mode=defer", "--lease-namespace=default"],
    )
    .expect("spawn guard");
    guard
        .wait_status("/readyz", 503, Duration::from_secs(30))
        .await
        .expect("serving, not ready");
    wait_for(
        || async { Ok((guard.metric("mosc_guard_leader").await == Some(1.0)).then_some(())) },
        Duration::from_secs(30),
        "the guard to hold the Lease",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    // Leading, not synced: for a few seconds nothing is written.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let mosc = mco::moscs(&cp.client()).get("worker").await.expect("get");
        assert!(
            finalizers_of(&mosc).is_empty(),
            "no finalizer before the caches synced\n{}",
            guard.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let log = guard.log();
    assert!(
        log.contains("finalizer controller waiting for the caches to sync"),
        "{log}"
    );
    assert!(!log.contains("finalizer controller starting"), "{log}");

    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/crds/machineconfigpools.yaml"
    );
    let out = cp
        .kubectl(["apply", "-f", manifest])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    guard
        .wait_status("/readyz", 200, Duration::from_secs(90))
        .await
        .expect("ready once the CRD exists");
    wait_for(
        || async {
            let mosc = mco::moscs(&cp.client()).get("worker").await?;
            Ok(finalizers_of(&mosc)
                .iter()
                .any(|f| f == FINALIZER)
                .then_some(()))
        },
        Duration::from_secs(30),
        "the controller to adopt the MachineOSConfig",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(40)));
    assert!(
        guard
            .log()
            .contains("caches synced; finalizer controller starting")
    );
}

/// RBAC of the guard's user `guard`, minus MachineConfigPools, which the binding `guard-pools`
/// grants separately (deleted and re-applied by the test).
const GUARD_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guard-base}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineosconfigs, machineosbuilds]
  verbs: [get, list, watch, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guard-base}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-base}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: guard}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: guard-pools}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigpools]
  verbs: [get, list, watch]
"#;

const GUARD_POOLS_BINDING: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: guard-pools}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: guard-pools}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: guard}
"#;

/// Waits until `kubectl auth can-i list machineconfigpools --as guard` answers `allowed`.
async fn wait_guard_may_list_pools(cp: &ControlPlane, allowed: bool) {
    wait_for(
        || async {
            let out = cp
                .kubectl([
                    "auth",
                    "can-i",
                    "list",
                    "machineconfigpools",
                    "--as",
                    "guard",
                ])
                .await?;
            Ok((out.success() == allowed).then_some(()))
        },
        Duration::from_secs(30),
        "the pools grant to take effect",
    )
    .await
    .expect("RBAC in effect");
}

/// A server-side dry run of deleting MachineOSConfig `name` as the admin: `Ok` if admitted,
/// else the API server's message.
async fn dry_run_delete(cp: &ControlPlane, name: &str) -> Result<(), String> {
    let params = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    mco::moscs(&cp.client())
        .delete(name, &params)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Item 1: a watch that keeps failing makes the guard unready, naming the cache, and no allow
/// is decided from the stale cache meanwhile; it recovers on its own.
///
/// The guard runs as user `guard` and reaches the API server through a forwarder. Its grant on
/// MachineConfigPools is revoked mid-run; an established watch is not cut by an RBAC change,
/// so the forwarder then drops the guard's connections (as an API server restart would): every
/// watch reconnects, and the pools watch fails with 403 from then on. Meanwhile the pool is
/// unpaused, so MCO would send its node to the MachineOSConfig's image, which the stale pool
/// cache (still paused) cannot see: a deletion must not be allowed from it. Restoring the grant
/// brings the watch, readiness and the rolling pool's denial back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_watch_drops_readiness_and_never_allows_from_the_stale_cache() {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    support::scenario::create_pool(&client, "worker", "node-role.kubernetes.io/worker", 1)
        .await
        .expect("pool");
    // One worker not on the image yet: once the pool is unpaused, MCO sends it there next.
    support::scenario::create_nodes(
        &client,
        &support::scenario::node_names(1),
        support::scenario::WORKER_ROLE_LABEL,
        &support::scenario::rendered_config("worker"),
    )
    .await
    .expect("node");
    support::objects::set_pool_paused(&client, "worker", true)
        .await
        .expect("pool paused");
    let image = support::objects::image("ab");
    support::objects::create_built_mosc(&client, "worker", &image)
        .await
        .expect("built MachineOSConfig");
    support::users::apply(&cp, GUARD_RBAC).await.expect("RBAC");
    support::users::apply(&cp, GUARD_POOLS_BINDING)
        .await
        .expect("pools grant");
    wait_guard_may_list_pools(&cp, true).await;

    let api_server: std::net::SocketAddr = cp
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("API server address");
    let forwarder = support::forwarder::Forwarder::start(api_server)
        .await
        .expect("forwarder");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        support::users::kubeconfig_via(&cp, "guard", dir.path(), &forwarder.https_url())
            .expect("kubeconfig");
    let mut guard = ServeProcess::spawn(
        &cp,
        &kubeconfig,
        &["--stale-after=5", "--lease-namespace=default"],
    )
    .expect("spawn guard");
    guard
        .wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("ready");
    support::serve::register_validating_webhook_at(&cp, &guard.base_url())
        .await
        .expect("webhook registered");
    dry_run_delete(&cp, "worker")
        .await
        .expect("paused pool, no node sent to the image: the deletion is allowed");

    // Revoke the pools grant, then cut the guard's connections so its watches reconnect.
    let out = cp
        .kubectl(["delete", "clusterrolebinding", "guard-pools"])
        .await
        .expect("kubectl");
    assert!(out.success(), "{out:?}");
    wait_guard_may_list_pools(&cp, false).await;
    forwarder.cut_connections();
    guard
        .wait_status("/readyz", 503, Duration::from_secs(60))
        .await
        .expect("not ready once the pools watch has failed for --stale-after");
    let (_, why) = guard.get("/readyz").await.expect("readyz");
    assert!(
        why.contains("machineconfigpools"),
        "names the cache: {why}\n{}",
        guard.log_tail(60)
    );
    assert!(why.contains("forbidden"), "says why: {why}");
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"machineconfigpools\"}")
            .await,
        Some(1.0)
    );
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"nodes\"}")
            .await,
        Some(0.0),
        "only the failing cache is stale"
    );
    assert_eq!(guard.metric("mosc_guard_ready").await, Some(0.0));

    // The pool is unpaused, so MCO sends the node to the image; the guard's pool cache cannot
    // see it.
    support::objects::set_pool_paused(&client, "worker", false)
        .await
        .expect("pool unpaused");
    let refused = dry_run_delete(&cp, "worker")
        .await
        .expect_err("no allow from the stale pool cache");
    assert!(
        refused.contains("could not verify") || refused.contains("cannot be deleted"),
        "{refused}"
    );

    // Restore the grant: the watch recovers with its backoff, readiness comes back on its own.
    support::users::apply(&cp, GUARD_POOLS_BINDING)
        .await
        .expect("pools grant");
    wait_guard_may_list_pools(&cp, true).await;
    guard
        .wait_status("/readyz", 200, Duration::from_secs(90))
        .await
        .expect("ready again once the watch recovers");
    assert_eq!(
        guard
            .metric("mosc_guard_cache_stale{cache=\"machineconfigpools\"}")
            .await,
        Some(0.0)
    );
    assert!(
        guard.log().contains("watch recovered"),
        "{}",
        guard.log_tail(30)
    );
    let refused = dry_run_delete(&cp, "worker")
        .await
        .expect_err("the pool is rolling out the image");
    assert!(refused.contains("rolling out"), "{refused}");
    // No decision allowed anything between the revocation and now.
    let log = guard.log();
    let allowed = log
        .lines()
        .filter(|l| l.contains("admission decision") && l.contains("result=allowed"))
        .count();
    assert_eq!(
        allowed, 1,
        "only the first deletion, of the paused pool, was allowed:\n{log}"
    );
}

/// How long the endpoints update takes to reach kube-proxy in the model below.
const PROPAGATION: Duration = Duration::from_secs(1);

/// Item 3: a steady stream of admission requests through the API server across a guard
/// restart fails none.
///
/// What is modelled: the webhook configuration has one URL, the Service's; here it points at a
/// TCP forwarder on 127.0.0.1 standing in for the Service's routing (kube-proxy). Guard A
/// serves; guard B (the new pod of a rolling update, maxSurge 1) starts and becomes Ready; A
/// gets SIGTERM. The test polls A's /readyz every 200 ms, like a readiness probe, and once it
/// is not 200 (or does not answer) it waits [`PROPAGATION`] (the endpoints update reaching
/// kube-proxy) and switches the forwarder's new connections to B, as the endpoints update
/// that removes an unready or terminating endpoint does. Connections already open stay on A,
/// as conntrack keeps them. Meanwhile a client sends server-side dry runs of a
/// MachineOSConfig deletion back to back (each goes through the webhook); every one must get
/// the guard's answer, none "failed calling webhook".
///
/// Where the model differs: a connection to a closed port of a real endpoint is refused
/// (RST to the SYN), which the API server does not retry; the forwarder accepts first and
/// then finds the target closed, so the API server sees a reset, which it retries a few times
/// (500 ms backoff, 5 steps) and can hide. So the test also asserts that no connection routed
/// to A while it was still the endpoint was refused by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_stream_of_reviews_across_a_guard_restart_fails_none() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let cp = ControlPlane::start().await.expect("control plane");
    // Never built: its deletion is allowed after the confirming read.
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");
    let args = ["--shutdown-delay=8", "--lease-namespace=default"];
    let mut old = ServeProcess::spawn(&cp, cp.kubeconfig(), &args).expect("spawn guard A");
    old.wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("A ready");
    let service = support::forwarder::Forwarder::start(old.addr())
        .await
        .expect("forwarder");
    support::serve::register_validating_webhook_at(&cp, &service.https_url())
        .await
        .expect("webhook registered");
    dry_run_delete(&cp, "worker").await.expect("through A");

    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let (cp_client, stop) = (cp.client(), Arc::clone(&stop));
        tokio::spawn(async move {
            let api = mco::moscs(&cp_client);
            let params = kube::api::DeleteParams {
                dry_run: true,
                ..Default::default()
            };
            let (mut answered, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Acquire) {
                match api.delete("worker", &params).await {
                    Ok(_) => answered += 1,
                    Err(e) => failed.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (answered, failed)
        })
    };

    let mut new = ServeProcess::spawn(&cp, cp.kubeconfig(), &args).expect("spawn guard B");
    new.wait_status("/readyz", 200, Duration::from_secs(30))
        .await
        .expect("B ready");
    tokio::time::sleep(Duration::from_secs(1)).await;
    old.sigterm();
    // The endpoints update: new connections go to B once A is not Ready.
    while let Some((200, _)) = old.get("/readyz").await {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(PROPAGATION).await;
    service.set_target(new.addr());
    old.wait_exit(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("A stops: {e}\n{}", old.log_tail(30)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Release);
    let (answered, failed) = stream.await.expect("stream");
    assert_eq!(
        service.refused(),
        0,
        "connections routed to guard A while it was still an endpoint were refused\nA:\n{}",
        old.log_tail(20)
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests failed across the restart, e.g. {:?}\nA:\n{}",
        failed.len(),
        failed.len() as u32 + answered,
        failed.first(),
        old.log_tail(20)
    );
    let decided_by = |g: &ServeProcess| {
        g.log()
            .lines()
            .filter(|l| l.contains("admission decision") && l.contains("name=worker"))
            .count()
    };
    let (by_old, by_new) = (decided_by(&old), decided_by(&new));
    tracing::info!("{answered} answered: {by_old} by A, {by_new} by B");
    assert!(
        by_old > 0 && by_new > 0,
        "A ({by_old}) then B ({by_new}) answered"
    );
    new.wait_status("/readyz", 200, Duration::from_secs(5))
        .await
        .expect("B still ready");
}

/// Item 4: an update the API server refuses as Invalid (422) is not retried like a conflict
/// every 200 ms: the controller backs off and reports it, with a `FinalizerUpdateFailed`
/// Warning Event and `mosc_guard_controller_errors_total{error="invalid"}`. A
/// ValidatingAdmissionPolicy refuses adding mosc-guard's finalizer, so the defer-mode
/// controller's adoption of the MachineOSConfig fails with 422 on an unchanged object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_finalizer_update_backs_off_and_is_reported() {
    let cp = ControlPlane::start().await.expect("control plane");
    create_mosc(
        &cp.client(),
        "worker",
        "registry.example:5000/ocb-image:latest",
    )
    .await
    .expect("create MachineOSConfig");
    support::users::apply(
        &cp,
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-guard-finalizer}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [machineconfiguration.openshift.io]
      apiVersions: ["*"]
      operations: [UPDATE]
      resources: [machineosconfigs]
  validations:
  - expression: "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'mosc-guard.dev/wait-for-rollout')"
    message: this cluster does not allow the mosc-guard finalizer
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-guard-finalizer}
spec:
  policyName: no-guard-finalizer
  validationActions: [Deny]
"#,
    )
    .await
    .expect("policy");
    // In effect once an admin's (dry-run) attempt is refused with 422.
    wait_for(
        || async {
            let params = PatchParams {
                dry_run: true,
                ..Default::default()
            };
            let patch = Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}}));
            match mco::moscs(&cp.client())
                .patch("worker", &params, &patch)
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 422 => Ok(Some(())),
                _ => Ok(None),
            }
        },
        Duration::from_secs(30),
        "the admission policy to be in effect",
    )
    .await
    .expect("policy in effect");

    let guard = support::guard::Guard::start_with_args(
        &cp,
        &["--deletion-mode=defer", "--lease-namespace=default"],
    )
    .await
    .expect("guard");
    let event = wait_for(
        || async {
            Ok(support::steps::events_about(
                &cp.client(),
                "MachineOSConfig",
                "worker",
                "FinalizerUpdateFailed",
            )
            .await
            .into_iter()
            .next())
        },
        Duration::from_secs(30),
        "a FinalizerUpdateFailed Event",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(30)));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("does not allow the mosc-guard finalizer"),
        "{note}"
    );
    // Backoff 1, 2, 4 s: a handful of attempts in 6 s, not one every 200 ms (about 30).
    tokio::time::sleep(Duration::from_secs(6)).await;
    let metrics = support::steps::guard_metrics(&guard)
        .await
        .expect("metrics");
    let invalid: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("mosc_guard_controller_errors_total{error=\"invalid\"} ")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("the invalid updates are counted:\n{metrics}"));
    assert!(
        (1.0..=6.0).contains(&invalid),
        "backed off, not retried at once: {invalid} attempts\n{}",
        guard.log_tail(30)
    );
    let mosc = mco::moscs(&cp.client()).get("worker").await.expect("get");
    assert!(finalizers_of(&mosc).is_empty());
}

/// Item 7: a refused deletion of a MachineOSBuild with a 253-character name (the longest valid
/// one) is recorded as a DeletionBlocked Event; `{name}.{hex}` was 270 characters, which the
/// API server rejected, so the Event was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_about_a_253_character_build_is_recorded() {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    let image = support::objects::image("cd");
    create_mosc(&client, "worker", "registry.example:5000/ocb-image:latest")
        .await
        .expect("create MachineOSConfig");
    let name = format!("worker-{}", "a".repeat(246));
    assert_eq!(name.len(), 253);
    let mut mosb = kube::api::DynamicObject::new(&name, &mco::mosb_resource()).data(json!({
        "spec": {
            "machineConfig": {"name": "rendered-worker-0"},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": "registry.example:5000/ocb-image:worker",
        }
    }));
    mosb.metadata.labels = Some([(mco::LABEL_MOSC.to_owned(), "worker".to_owned())].into());
    mco::mosbs(&client)
        .create(&Default::default(), &mosb)
        .await
        .expect("create the MachineOSBuild");
    mco::mosbs(&client)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"digestedImagePushSpec": image}})),
        )
        .await
        .expect("MachineOSBuild status");
    let node = "ip-10-0-1-1.example.internal".to_string();
    support::scenario::create_nodes(
        &client,
        std::slice::from_ref(&node),
        "node-role.kubernetes.io/worker",
        "rendered-worker-0",
    )
    .await
    .expect("node");
    mco::nodes(&client)
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                mco::DESIRED_IMAGE: image,
                mco::STATE: mco::STATE_WORKING,
            }}})),
        )
        .await
        .expect("the node is rolling to the image");

    let guard = support::guard::Guard::start(&cp).await.expect("guard");
    support::guard::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    let refused = mco::mosbs(&client)
        .delete(&name, &Default::default())
        .await
        .expect_err("a node still needs the image");
    assert!(refused.to_string().contains(&node), "{refused}");
    let event = wait_for(
        || async {
            Ok(
                support::steps::events_about(&client, "MachineOSBuild", &name, "DeletionBlocked")
                    .await
                    .into_iter()
                    .next(),
            )
        },
        Duration::from_secs(30),
        "a DeletionBlocked Event about the long-named build",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", guard.log_tail(20)));
    let event_name = event.metadata.name.unwrap_or_default();
    assert!(event_name.len() <= 253, "{event_name}");
}
