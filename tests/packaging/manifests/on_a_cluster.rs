//! The rendered objects on a real API server: server-side dry runs, the NetworkPolicy's ports and peers, and the ValidatingAdmissionPolicy's binding in each mode.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_pass_server_side_dry_run() {
    let cp = ControlPlane::start().await.expect("control plane");
    install_thirdparty_crds(&cp).await;

    // A server-side dry run of a namespaced object fails with "namespaces not found" unless its
    // namespace exists, and the dry run of the Namespace itself creates nothing. So the
    // namespace is created for real first (`default`, the other namespace used, always exists).
    let base = rendered("base");
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&namespaces_json(&base))).await;
    // The openshift component's console dashboard lives in openshift-config-managed, which
    // every OpenShift cluster has.
    kubectl_ok(
        &cp,
        &["create", "namespace", "openshift-config-managed"],
        None,
    )
    .await;

    for dir in DIRS {
        let yaml = render_yaml(dir).expect("render");
        let out = kubectl(
            &cp,
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            Some(&yaml),
        )
        .await;
        assert!(
            out.success(),
            "{dir}: server-side dry run failed:\n{}",
            out.stderr
        );
        // No warning either: no Pod Security violation, no deprecated API, no unknown field.
        assert!(
            !out.stderr.to_ascii_lowercase().contains("warning"),
            "{dir}: warnings:\n{}",
            out.stderr
        );
        // Every object went through: `<kind>[.<group>]/<name> ... (server dry run)`.
        let objects = rendered(dir);
        for o in &objects {
            let (kind, _, name) = key(o);
            let kind = kind.to_ascii_lowercase();
            let listed = out.stdout.lines().any(|line| {
                line.split_once('/').is_some_and(|(resource, rest)| {
                    (resource == kind || resource.starts_with(&format!("{kind}.")))
                        && rest.starts_with(&format!("{name} "))
                        && rest.ends_with("(server dry run)")
                })
            });
            assert!(
                listed,
                "{dir}: {kind} {name} missing from the dry run's output:\n{}",
                out.stdout
            );
        }
    }

    // The checks above can fail: a misspelt field of each third-party kind is refused ...
    let cert_manager = rendered("overlays/cert-manager");
    let openshift = rendered("overlays/openshift");
    let mut monitor = get(&openshift, "ServiceMonitor", NAME).clone();
    let tls = monitor["spec"]["endpoints"][0]["tlsConfig"].take();
    monitor["spec"]["endpoints"][0]["tlsConfig"] =
        json!({"caFiel": tls["caFile"], "serverName": tls["serverName"]});
    let mut serving = get(&cert_manager, "Certificate", "mosc-guard-serving").clone();
    serving["spec"]["dnsName"] = serving["spec"]["dnsNames"].take();
    let mut issuer = get(&cert_manager, "Issuer", "mosc-guard-selfsigned").clone();
    issuer["spec"] = json!({"selfsigned": {}});
    let mut rule = get(&openshift, "PrometheusRule", NAME).clone();
    let first = rule["spec"]["groups"][0]["rules"][0]
        .as_object_mut()
        .expect("a rule");
    let duration = first.remove("for").expect("the first alert has `for`");
    first.insert("fro".into(), duration);
    for (broken, field) in [
        (monitor, "caFiel"),
        (rule, "fro"),
        (serving, "dnsName"),
        (issuer, "selfsigned"),
    ] {
        let out = kubectl(
            &cp,
            &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
            Some(&broken.to_string()),
        )
        .await;
        assert!(
            !out.success() && out.stderr.contains("unknown field") && out.stderr.contains(field),
            "a misspelt {field} must be refused: {out:?}"
        );
    }
    // ... and a Deployment that breaks Pod Security "restricted" draws a warning.
    let mut deployment = get(&base, "Deployment", NAME).clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        .as_object_mut()
        .expect("securityContext")
        .remove("capabilities");
    let out = kubectl(
        &cp,
        &["apply", "--dry-run=server", "--validate=strict", "-f", "-"],
        Some(&deployment.to_string()),
    )
    .await;
    assert!(
        out.success()
            && out
                .stderr
                .contains("would violate PodSecurity \"restricted"),
        "{out:?}"
    );
}

#[test]
fn network_policy_admits_only_the_webhook_port_from_the_api_server_and_monitoring() {
    let port = json!([{"port": "https", "protocol": "TCP"}]);
    let metrics = json!([{"port": "metrics", "protocol": "TCP"}]);
    // The base cannot name the API server portably (see networkpolicy.yaml): every address
    // until the admin narrows rule 0; rule 1 is the monitoring namespace.
    for dir in [
        "base",
        "overlays/defer",
        "overlays/cert-manager",
        "overlays/cert-manager-defer",
    ] {
        let objects = rendered(dir);
        let policy = get(&objects, "NetworkPolicy", NAME);
        assert_eq!(policy["metadata"]["namespace"], NAMESPACE, "{dir}");
        assert_eq!(
            policy["spec"]["podSelector"],
            json!({"matchLabels": {"app.kubernetes.io/name": NAME}}),
            "{dir}"
        );
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]), "{dir}");
        assert_eq!(
            policy["spec"]["ingress"],
            json!([
                {"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}], "ports": port},
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}], "ports": metrics},
            ]),
            "{dir}"
        );
    }
    // OpenShift: exactly the host-network policy group (kube-apiserver) and the platform
    // Prometheus.
    for dir in ["overlays/openshift", "overlays/openshift-defer"] {
        let objects = rendered(dir);
        let policy = get(&objects, "NetworkPolicy", NAME);
        assert_eq!(
            policy["spec"]["ingress"],
            json!([
                {"from": [{"namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}}}], "ports": port},
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-monitoring"}}}], "ports": metrics},
            ]),
            "{dir}"
        );
    }
    // The ports it names are the container's, which the Service targets.
    let base = rendered("base");
    assert_eq!(container(&base)["ports"][0]["name"], "https");
    assert_eq!(container(&base)["ports"][1]["name"], "metrics");
}

#[test]
fn admission_policy_binds_the_guard_and_lets_it_add_the_finalizer_only_in_defer_mode() {
    for dir in DIRS {
        let objects = rendered(dir);
        let policy = get(&objects, "ValidatingAdmissionPolicy", VAP);
        assert_eq!(policy["spec"]["failurePolicy"], "Fail", "{dir}");
        assert_eq!(
            policy["spec"]["matchConditions"][0]["expression"],
            format!("request.userInfo.username == \"system:serviceaccount:{NAMESPACE}:{NAME}\""),
            "{dir}"
        );
        let binding = get(&objects, "ValidatingAdmissionPolicyBinding", VAP);
        assert_eq!(
            binding["spec"],
            json!({"policyName": VAP, "validationActions": ["Deny"]}),
            "{dir}"
        );
        let may_add = &policy["spec"]["variables"][0];
        assert_eq!(may_add["name"], "mayAdd", "{dir}");
        let want = if DEFER_DIRS.contains(dir) {
            "true"
        } else {
            "false"
        };
        assert_eq!(may_add["expression"], want, "{dir}");
    }
}
