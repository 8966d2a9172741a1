//! Every overlay renders and wires its serving certificate (service-ca on OpenShift, cert-manager elsewhere).

use super::*;

#[test]
fn every_overlay_renders_and_wires_its_certificates() {
    let base = rendered("base");
    let base_keys: BTreeSet<_> = base.iter().map(key).collect();
    let base_grants = granted_to_guard(&base);
    let image = format!(
        "quay.io/mosc-guard/mosc-guard:{}",
        env!("CARGO_PKG_VERSION")
    );
    for dir in DIRS {
        let objects = rendered(dir);
        let keys: BTreeSet<_> = objects.iter().map(key).collect();
        assert_eq!(keys.len(), objects.len(), "{dir}: duplicate objects");
        assert!(keys.is_superset(&base_keys), "{dir} drops base objects");
        // No overlay gives the guard more (or less) than the base.
        assert_eq!(
            granted_to_guard(&objects),
            base_grants,
            "{dir}: RBAC of the guard"
        );
        // Nothing ships a Secret; every namespaced object names its namespace.
        for o in &objects {
            assert_ne!(o["kind"], "Secret", "{dir}");
            let (kind, ns, name) = key(o);
            let cluster_scoped = matches!(
                kind.as_str(),
                "Namespace"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "ValidatingWebhookConfiguration"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            );
            assert_eq!(
                ns.is_empty(),
                cluster_scoped,
                "{dir}: namespace of {kind} {name}"
            );
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/part-of"], "mosc-guard",
                "{dir}: {kind} {name}"
            );
        }
        // One image name and tag, the crate's version (what `make image` builds).
        assert_eq!(container(&objects)["image"], image.as_str(), "{dir}");
        // Every webhook calls the Service on its port.
        for config in webhook_configurations(&objects) {
            for w in config["webhooks"].as_array().expect("webhooks") {
                let svc = &w["clientConfig"]["service"];
                assert_eq!(
                    (
                        svc["namespace"].as_str(),
                        svc["name"].as_str(),
                        &svc["port"]
                    ),
                    (Some(NAMESPACE), Some(NAME), &json!(443)),
                    "{dir}"
                );
            }
        }
        // Defer mode: one MutatingWebhookConfiguration and the argument, appended once.
        let defer = DEFER_DIRS.contains(dir);
        let mut want_args: Vec<&str> = SERVE_ARGS.to_vec();
        if defer {
            want_args.push("--deletion-mode=defer");
        }
        assert_eq!(container(&objects)["args"], json!(want_args), "{dir}");
        assert_eq!(
            of_kind(&objects, "MutatingWebhookConfiguration").count(),
            usize::from(defer),
            "{dir}"
        );

        let configs = webhook_configurations(&objects);
        if dir.contains("openshift") {
            check_openshift(dir, &objects, &configs);
        } else if dir.contains("cert-manager") {
            check_cert_manager(dir, &objects, &configs);
        } else {
            // Base alone and plain defer: the admin provides the Secret and the caBundle.
            for config in &configs {
                assert!(
                    config["metadata"].get("annotations").is_none(),
                    "{dir}: {config}"
                );
            }
            assert!(
                get(&objects, "Service", NAME)["metadata"]
                    .get("annotations")
                    .is_none()
            );
        }
    }
}

/// service-ca: serving certificate into the Deployment's Secret, CA into every webhook
/// configuration; the ServiceMonitor verifies the Service name with the service-ca bundle.
fn check_openshift(dir: &str, objects: &[Value], configs: &[&Value]) {
    let service = get(objects, "Service", NAME);
    assert_eq!(
        service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        tls_secret_name(objects),
        "{dir}"
    );
    for config in configs {
        assert_eq!(
            config["metadata"]["annotations"],
            json!({"service.beta.openshift.io/inject-cabundle": "true"}),
            "{dir}: {}",
            config["kind"]
        );
    }
    assert_eq!(
        get(objects, "Namespace", NAME)["metadata"]["labels"]["openshift.io/cluster-monitoring"],
        "true"
    );
    let monitor = get(objects, "ServiceMonitor", NAME);
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "{dir}: ServiceMonitor selects the Service"
        );
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(
        endpoint["port"], service["spec"]["ports"][1]["name"],
        "{dir}"
    );
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["tlsConfig"],
        json!({
            "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
            "serverName": service_dns_name(),
        })
    );
    // Its alerts live beside it (their content: tests/packaging/alerts.rs).
    let rule = get(objects, "PrometheusRule", NAME);
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE, "{dir}");
    // Prometheus may discover the Service's endpoints.
    let role = get(objects, "Role", "prometheus-k8s");
    assert!(rule_set(role).contains(&("".into(), "endpoints".into(), "list".into())));
    let binding = get(objects, "RoleBinding", "prometheus-k8s");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}])
    );
}

/// cert-manager: selfSigned Issuer -> CA Certificate -> CA Issuer -> serving Certificate
/// (Secret the Deployment mounts, Service DNS names), whose CA cainjector puts into every
/// webhook configuration.
fn check_cert_manager(dir: &str, objects: &[Value], configs: &[&Value]) {
    let mut injected_from = BTreeSet::new();
    for config in configs {
        let from = str_of(
            &config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "inject-ca-from",
        );
        injected_from.insert(from.to_owned());
    }
    assert_eq!(injected_from.len(), 1, "{dir}: {injected_from:?}");
    let from = injected_from.pop_first().expect("one");
    let (ns, name) = from.split_once('/').expect("namespace/name");
    assert_eq!(ns, NAMESPACE);
    let serving = get(objects, "Certificate", name);
    let spec = &serving["spec"];
    assert_eq!(spec["secretName"], tls_secret_name(objects), "{dir}");
    let dns: Vec<&str> = spec["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .map(|d| str_of(d, "dnsName"))
        .collect();
    assert!(dns.contains(&service_dns_name().as_str()), "{dir}: {dns:?}");
    assert_ne!(spec["isCA"], true);
    assert_eq!(spec["issuerRef"]["kind"], "Issuer");
    let ca_issuer = get(
        objects,
        "Issuer",
        str_of(&spec["issuerRef"]["name"], "issuerRef"),
    );
    let ca_secret = str_of(&ca_issuer["spec"]["ca"]["secretName"], "ca.secretName");
    let ca_cert = of_kind(objects, "Certificate")
        .find(|c| c["spec"]["secretName"] == ca_secret)
        .expect("a Certificate writes the CA Secret");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    assert_eq!(ca_cert["spec"]["issuerRef"]["kind"], "Issuer");
    let root = get(
        objects,
        "Issuer",
        str_of(&ca_cert["spec"]["issuerRef"]["name"], "issuerRef"),
    );
    assert_eq!(root["spec"], json!({"selfSigned": {}}));
    assert!(
        get(objects, "Service", NAME)["metadata"]
            .get("annotations")
            .is_none()
    );
}
