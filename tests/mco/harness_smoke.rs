//! Quick check of the end-to-end harness itself: a real control plane (with the MCO CRDs) and a
//! real registry come up, kubectl works against them, and a pushed image can be pulled and deleted.

use std::time::Instant;

use testkit::controlplane::ControlPlane;
use testkit::registry::Registry;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_and_registry_work() {
    let started = Instant::now();
    let (cp, registry) = tokio::try_join!(ControlPlane::start(), Registry::start())
        .expect("control plane and registry start");
    eprintln!(
        "control plane up in {:.2?}, both up in {:.2?}",
        cp.startup_time(),
        started.elapsed()
    );

    // kubectl reaches the API server as admin, and the CRDs are served under their short names.
    let node = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ip-10-0-11-240.us-east-2.compute.internal",
                     "labels": {"node-role.kubernetes.io/worker": ""}},
    });
    let out = cp
        .kubectl_with_stdin(["create", "-f", "-"], Some(&node.to_string()))
        .await
        .expect("run kubectl create");
    assert!(out.success(), "kubectl create node failed: {}", out.stderr);
    let out = cp
        .kubectl([
            "get",
            "nodes",
            "-l",
            "node-role.kubernetes.io/worker",
            "-o",
            "name",
        ])
        .await
        .expect("run kubectl get");
    assert_eq!(
        out.stdout.trim(),
        "node/ip-10-0-11-240.us-east-2.compute.internal"
    );
    // As on a real cluster: `mcp` is the only MCO short name; `mosc`/`mosb` are unknown.
    for kind in ["mcp", "machineosconfigs", "machineosbuilds"] {
        let out = cp.kubectl(["get", kind]).await.expect("run kubectl get");
        assert!(out.success(), "kubectl get {kind} failed: {}", out.stderr);
    }
    for short in ["mosc", "mosb"] {
        let out = cp.kubectl(["get", short]).await.expect("run kubectl get");
        assert!(
            !out.success()
                && out
                    .stderr
                    .contains("the server doesn't have a resource type"),
            "kubectl get {short} should fail as on OpenShift 4.20: {out:?}"
        );
    }

    // A pushed image can be pulled by digest; once deleted, the registry says "manifest unknown".
    let repo = "openshift-machine-config-operator/ocb-image";
    let digest = registry
        .push_image(repo, "worker-smoke")
        .await
        .expect("push image");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "digest {digest}"
    );
    registry
        .pull_manifest(repo, &digest)
        .await
        .expect("pull pushed manifest");
    registry
        .pull_manifest(repo, "worker-smoke")
        .await
        .expect("pull pushed tag");
    assert_eq!(
        registry
            .manifest_status(repo, &digest)
            .await
            .expect("status"),
        None
    );
    assert!(
        registry
            .delete_manifest(repo, &digest)
            .await
            .expect("delete manifest")
    );
    let err = registry
        .pull_manifest(repo, &digest)
        .await
        .expect_err("deleted manifest must not be pullable");
    assert_eq!(err, "manifest unknown");
    assert_eq!(
        registry
            .manifest_status(repo, &digest)
            .await
            .expect("status"),
        Some("MANIFEST_UNKNOWN: manifest unknown".to_owned())
    );
    assert!(
        !registry
            .delete_manifest(repo, &digest)
            .await
            .expect("delete again")
    );
    eprintln!("harness smoke test done in {:.2?}", started.elapsed());
}

/// What one test leaves on its control plane: a namespace holding an object with a finalizer, a
/// node, and (written last) a webhook that refuses every configmap write and deletion, as a
/// guard's does once its server is gone.
const LEFT_BEHIND: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: left-behind}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: left-behind, finalizers: [example.com/keep]}
---
apiVersion: v1
kind: Node
metadata: {name: left-behind-node}
"#;
const DEAD_WEBHOOK: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: left-behind}
webhooks:
- name: left-behind.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {url: "https://127.0.0.1:1/"}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, DELETE], resources: [configmaps]}
"#;

/// A control plane a test gave back is lent to the next test reset: what the earlier test wrote
/// is gone (the refusing webhook first, or nothing else could be deleted), its release is the
/// default again, and it serves the next test's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lent_control_plane_holds_nothing_of_the_test_before() {
    // The earlier test, on a thread of its own: its control plane becomes idle when it ends.
    let earlier = std::thread::spawn(|| {
        let runtime = testkit::runtime().expect("runtime");
        runtime.block_on(async {
            let cp = ControlPlane::start().await.expect("control plane");
            for yaml in [LEFT_BEHIND, DEAD_WEBHOOK] {
                let out = cp
                    .kubectl_with_stdin(["create", "-f", "-"], Some(yaml))
                    .await
                    .expect("run kubectl create");
                assert!(out.success(), "kubectl create failed: {}", out.stderr);
            }
            cp.set_release("4.22.3").await.expect("set release");
            cp.server().to_owned()
        })
    });
    let server = earlier.join().expect("the earlier test");

    let cp = ControlPlane::start().await.expect("control plane");
    assert_eq!(cp.server(), server, "the idle control plane is lent");
    for (kind, name) in [
        ("namespace", "left-behind"),
        ("node", "left-behind-node"),
        ("validatingwebhookconfiguration", "left-behind"),
    ] {
        let out = cp
            .kubectl(["get", kind, name])
            .await
            .expect("run kubectl get");
        assert!(
            !out.success() && out.stderr.contains("NotFound"),
            "{kind} {name} is still there: {out:?}"
        );
    }
    let release = testkit::clusterversion::desired_version(&cp.client())
        .await
        .expect("read the ClusterVersion");
    assert_eq!(
        release.as_deref(),
        Some(testkit::controlplane::DEFAULT_RELEASE)
    );
    let out = cp
        .kubectl(["create", "configmap", "fresh", "-n", "default"])
        .await
        .expect("run kubectl create");
    assert!(out.success(), "a write after the reset: {}", out.stderr);
}
