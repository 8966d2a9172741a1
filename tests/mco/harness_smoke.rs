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
