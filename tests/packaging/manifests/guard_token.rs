//! A stolen guard token may patch MachineOSConfigs, so the ValidatingAdmissionPolicy refuses everything but the finalizer.

use super::*;

/// Runs kubectl with the ServiceAccount's kubeconfig.
async fn kubectl_as(kubeconfig: &std::path::Path, args: &[&str]) -> KubectlOutput {
    let cache = kubeconfig.with_extension("cache");
    testkit::kubectl::run(kubeconfig, &cache, args, None)
        .await
        .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
}

/// A stolen guard token may patch MachineOSConfigs (RBAC cannot say
/// "only finalizers"), so the ValidatingAdmissionPolicy must refuse everything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_token_can_change_only_its_finalizer() {
    let cp = ControlPlane::start().await.expect("control plane");
    // The base for real (deny mode's policy), without the webhook configuration: no guard runs.
    apply_base_without_webhook(&cp).await;
    let other = "example.com/keep";
    let mosc = json!({
        "apiVersion": format!("{MCO}/v1"), "kind": "MachineOSConfig",
        "metadata": {"name": "worker", "labels": {"team": "infra"}, "finalizers": [FINALIZER, other]},
        "spec": {
            "machineConfigPool": {"name": "worker"},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push"},
            "renderedImagePushSpec": "registry.example.com/ocb-image:latest",
            "containerFile": [{"containerfileArch": "NoArch", "content": "FROM scratch"}]
        }
    })
    .to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&mosc)).await;
    let dir = testkit::temp_dir("mosc-guard-vap-").expect("temp dir");
    let kubeconfig = service_account_kubeconfig(&cp, dir.path()).await;
    let patch = |json_patch: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move {
            kubectl_as(
                &kubeconfig,
                &[
                    "patch",
                    "machineosconfig",
                    "worker",
                    "--type=json",
                    "-p",
                    json_patch,
                ],
            )
            .await
        }
    };
    let refused_by_policy = |out: &KubectlOutput, what: &str| {
        assert!(
            !out.success() && out.stderr.contains(VAP),
            "{what} must be refused by {VAP}: {out:?}"
        );
    };

    // The policy may need a moment to be loaded by the API server: wait until a spec patch is
    // refused (bounded), then check each case once.
    let spec = r#"[{"op":"replace","path":"/spec/containerFile/0/content","value":"FROM evil"}]"#;
    let mut out = patch(spec).await;
    for _ in 0..50 {
        if !out.success() && out.stderr.contains(VAP) {
            break;
        }
        // Undo a patch that went through before the policy was active.
        kubectl_ok(&cp, &["apply", "-f", "-"], Some(&mosc)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        out = patch(spec).await;
    }
    refused_by_policy(&out, "a spec patch (spec.containerFile is the nodes' OS)");
    refused_by_policy(
        &patch(r#"[{"op":"add","path":"/metadata/labels/evil","value":"x"}]"#).await,
        "a label patch",
    );
    refused_by_policy(
        &patch(r#"[{"op":"add","path":"/metadata/annotations","value":{"mosc-guard.dev/allow-deletion":"x"}}]"#).await,
        "setting the override annotation",
    );
    refused_by_policy(
        &patch(r#"[{"op":"remove","path":"/metadata/finalizers/1"}]"#).await,
        "removing another finalizer",
    );
    // Its own finalizer: removing it is allowed (a leftover of defer mode) ...
    let out = patch(r#"[{"op":"test","path":"/metadata/finalizers/0","value":"mosc-guard.dev/wait-for-rollout"},{"op":"remove","path":"/metadata/finalizers/0"}]"#).await;
    assert!(out.success(), "removing its own finalizer: {out:?}");
    // ... adding it only in defer mode.
    let add = r#"[{"op":"add","path":"/metadata/finalizers/-","value":"mosc-guard.dev/wait-for-rollout"}]"#;
    refused_by_policy(&patch(add).await, "adding the finalizer in deny mode");
    let defer = rendered("overlays/defer");
    let policy = get(&defer, "ValidatingAdmissionPolicy", VAP).to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&policy)).await;
    let mut out = patch(add).await;
    for _ in 0..50 {
        if out.success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        out = patch(add).await;
    }
    assert!(out.success(), "adding the finalizer in defer mode: {out:?}");
    refused_by_policy(&patch(spec).await, "a spec patch in defer mode");

    // What is left is exactly what the admin created, plus nothing.
    let out = kubectl_ok(
        &cp,
        &["get", "machineosconfig", "worker", "-o", "json"],
        None,
    )
    .await;
    let now: Value = serde_json::from_str(&out.stdout).expect("MOSC json");
    assert_eq!(now["spec"]["containerFile"][0]["content"], "FROM scratch");
    assert_eq!(now["metadata"]["labels"], json!({"team": "infra"}));
    assert_eq!(now["metadata"]["finalizers"], json!([other, FINALIZER]));
    // The admin is not matched by the policy at all.
    kubectl_ok(
        &cp,
        &[
            "patch",
            "machineosconfig",
            "worker",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"admin":"yes"}}}"#,
        ],
        None,
    )
    .await;
}
