//! Verdicts over HTTPS: denials with actionable messages, allows, defer mode's warning and
//! finalizer, the override, dry runs, and malformed, wrong-kind and oversized requests.

use super::*;

#[tokio::test]
async fn denies_a_deletion_a_node_still_needs_with_an_actionable_message() {
    let s = setup().await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    let resp = &out["response"];
    assert_eq!(resp["uid"], "3c9f2a58-5d0e-4a43-9d34-1f0b2b5e9e01");
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 403);
    let msg = resp["status"]["message"].as_str().expect("message");
    assert!(msg.starts_with("machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it."), "{msg}");
    assert!(msg.contains(&format!("{NODE} (pool worker, state Working): desired .../ocb-image@sha256:01971adebd63..., current <none>")), "{msg}");
    assert!(
        msg.contains("oc annotate machineosconfig worker mosc-guard.dev/allow-deletion="),
        "{msg}"
    );
}

/// `mosc("worker")` carrying defer mode's finalizer.
fn protected_worker() -> Value {
    let mut object = mosc("worker", None);
    object["metadata"]["finalizers"] = json!(["mosc-guard.dev/wait-for-rollout"]);
    object
}

#[tokio::test]
async fn defer_mode_accepts_a_protected_config_with_a_warning_and_nothing_else() {
    let s = setup_in_mode(StaticView(Arc::new(cluster())), DeletionMode::Defer).await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", protected_worker(), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert_eq!(
        out["response"]["warnings"],
        json!([format!(
            "mosc-guard: deletion of machineosconfig \"worker\" deferred: 1 node still needs an image built from it ({NODE}); it completes when the rollout settles"
        )])
    );

    // Without the finalizer nothing would hold it: denied as in deny mode, saying why.
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false, "{out}");
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        msg.starts_with("machineosconfig \"worker\" cannot be deleted yet"),
        "{msg}"
    );
    assert!(
        msg.contains("does not carry the finalizer mosc-guard.dev/wait-for-rollout"),
        "{msg}"
    );

    // Builds are never deferred: their deletion removes the image at once.
    let build = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
        "metadata": {"name": "worker-8f2a1c", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
        "status": {"digestedImagePushSpec": IMAGE}});
    let out = post(&s, &review("DELETE", "machineosbuilds", build, false)).await;
    assert_eq!(out["response"]["allowed"], false, "{out}");

    // Deny mode ignores the finalizer.
    let deny = setup().await;
    let out = post(
        &deny,
        &review("DELETE", "machineosconfigs", protected_worker(), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false, "{out}");
}

#[tokio::test]
async fn mutate_adds_the_finalizer_in_defer_mode_only() {
    let create = review("CREATE", "machineosconfigs", mosc("worker", None), false);
    let defer = setup_in_mode(StaticView(Arc::new(cluster())), DeletionMode::Defer).await;
    let out = post_to(&defer, "/mutate", &create).await;
    let resp = &out["response"];
    assert_eq!(resp["allowed"], true, "{out}");
    assert_eq!(resp["patchType"], "JSONPatch");
    // kube-rs sends the patch bytes as a JSON array of numbers, which kube-apiserver decodes
    // into its []byte like base64 (the defer-mode end-to-end tests rely on it).
    let bytes: Vec<u8> = serde_json::from_value(resp["patch"].clone()).expect("patch bytes");
    let patch: Value = serde_json::from_slice(&bytes).expect("JSON patch");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/finalizers", "value": ["mosc-guard.dev/wait-for-rollout"]}])
    );

    // Already protected: nothing to patch. In deny mode: never, or no one would release it.
    let update = review("UPDATE", "machineosconfigs", protected_worker(), false);
    let out = post_to(&defer, "/mutate", &update).await;
    assert_eq!(
        (&out["response"]["allowed"], &out["response"]["patch"]),
        (&json!(true), &Value::Null)
    );
    let deny = setup().await;
    let out = post_to(&deny, "/mutate", &create).await;
    assert_eq!(
        (&out["response"]["allowed"], &out["response"]["patch"]),
        (&json!(true), &Value::Null)
    );
}

#[tokio::test]
async fn allows_a_safe_deletion_and_other_operations_untouched() {
    let s = setup().await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("infra", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"].get("warnings").is_none());
    for op in ["CREATE", "UPDATE"] {
        let out = post(
            &s,
            &review(op, "machineosconfigs", mosc("worker", None), false),
        )
        .await;
        assert_eq!(out["response"]["allowed"], true, "{op}");
        assert!(out["response"].get("warnings").is_none(), "{op}");
    }
    let mut other = review("DELETE", "machineconfigs", mosc("worker", None), false);
    other["request"]["resource"]["resource"] = json!("machineconfigs");
    assert_eq!(post(&s, &other).await["response"]["allowed"], true);
}

#[tokio::test]
async fn deleting_the_build_being_rolled_is_denied() {
    let s = setup().await;
    let mosb = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSBuild",
        "metadata": {"name": "worker-8f2a1c", "labels": {LABEL_MACHINE_OS_CONFIG: "worker"}},
        "status": {"digestedImagePushSpec": IMAGE}
    });
    let out = post(&s, &review("DELETE", "machineosbuilds", mosb, false)).await;
    assert_eq!(out["response"]["allowed"], false);
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(
        msg.starts_with("machineosbuild \"worker-8f2a1c\" cannot be deleted yet"),
        "{msg}"
    );
}

#[tokio::test]
async fn override_allows_with_warnings() {
    let s = setup().await;
    let old = mosc("worker", Some("node is being replaced"));
    let out = post(&s, &review("DELETE", "machineosconfigs", old, false)).await;
    assert_eq!(out["response"]["allowed"], true);
    let warnings: Vec<&str> = out["response"]["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings[0].contains("node is being replaced"),
        "{warnings:?}"
    );
    assert!(warnings.iter().any(|w| w.contains(NODE)), "{warnings:?}");
}

#[tokio::test]
async fn dry_run_gets_the_same_verdict() {
    let s = setup().await;
    let wet = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    let dry = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), true),
    )
    .await;
    assert_eq!(dry["response"]["allowed"], false);
    assert_eq!(dry["response"]["status"], wet["response"]["status"]);
}

#[tokio::test]
async fn malformed_wrong_kind_and_oversized_requests_are_rejected_with_reasons() {
    let s = setup().await;
    let url = format!("{}/validate", s.server.url);
    let send = |body: Vec<u8>| {
        s.http
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let resp = send(b"{\"apiVersion\": ".to_vec()).await.expect("request");
    assert_eq!(resp.status(), 400);
    assert!(
        resp.text()
            .await
            .expect("body")
            .contains("not a valid AdmissionReview")
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    let resp = send(serde_json::to_vec(&pod).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 400);
    let text = resp.text().await.expect("body");
    assert!(text.contains("AdmissionReview"), "{text}");

    let mut v1beta1 = review("DELETE", "machineosconfigs", mosc("worker", None), false);
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = send(serde_json::to_vec(&v1beta1).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 400);
    assert!(
        resp.text()
            .await
            .expect("body")
            .contains("admission.k8s.io/v1beta1")
    );

    let mut huge = review("DELETE", "machineosconfigs", mosc("worker", None), false);
    huge["request"]["oldObject"]["spec"]["padding"] = json!("x".repeat(MAX_BODY_BYTES));
    let resp = send(serde_json::to_vec(&huge).expect("json"))
        .await
        .expect("request");
    assert_eq!(resp.status(), 413);
}
