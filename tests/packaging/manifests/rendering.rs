//! What `manifests/base` renders: the documented objects, the webhook configurations, and the image tag the Makefile builds.

use super::*;

/// MCO's machine-os-builder, as the webhook configuration and the guard name it.
const MOB: &str = mosc_guard::core::model::MACHINE_OS_BUILDER_USER;

#[test]
fn base_renders_the_documented_objects() {
    let objects = rendered("base");
    let keys: BTreeSet<_> = objects.iter().map(key).collect();
    let want: BTreeSet<_> = [
        ("Namespace", "", NAME),
        ("ServiceAccount", NAMESPACE, NAME),
        ("ClusterRole", "", NAME),
        ("ClusterRoleBinding", "", NAME),
        ("Role", "default", "mosc-guard-events"),
        ("RoleBinding", "default", "mosc-guard-events"),
        ("Role", NAMESPACE, "mosc-guard-leader-election"),
        ("RoleBinding", NAMESPACE, "mosc-guard-leader-election"),
        ("Service", NAMESPACE, NAME),
        ("Deployment", NAMESPACE, NAME),
        ("PodDisruptionBudget", NAMESPACE, NAME),
        ("ValidatingWebhookConfiguration", "", NAME),
        ("NetworkPolicy", NAMESPACE, NAME),
        ("ValidatingAdmissionPolicy", "", VAP),
        ("ValidatingAdmissionPolicyBinding", "", VAP),
    ]
    .into_iter()
    .map(|(k, n, m)| (k.to_owned(), n.to_owned(), m.to_owned()))
    .collect();
    assert_eq!(keys, want);

    // Least privilege, rule by rule.
    let mut cluster = triples("", &["nodes"], &["get", "list", "watch"]);
    cluster.extend(triples(
        MCO,
        &["machineosconfigs", "machineosbuilds", "machineconfigpools"],
        &["get", "list", "watch"],
    ));
    cluster.extend(triples(MCO, &["machineosconfigs"], &["patch"]));
    // The release, and Machines that join the cluster: read only.
    cluster.extend(triples(
        "config.openshift.io",
        &["clusterversions"],
        &["get", "list", "watch"],
    ));
    cluster.extend(triples(
        "machine.openshift.io",
        &["machines"],
        &["get", "list", "watch"],
    ));
    // The registry audit: the one ControllerConfig by name, the mirror sets listed.
    cluster.extend(triples(
        MCO,
        &["controllerconfigs/machine-config-controller"],
        &["get"],
    ));
    cluster.extend(triples(
        "config.openshift.io",
        &["imagedigestmirrorsets"],
        &["list"],
    ));
    cluster.extend(triples(
        "operator.openshift.io",
        &["imagecontentsourcepolicies"],
        &["list"],
    ));
    assert_eq!(rule_set(get(&objects, "ClusterRole", NAME)), cluster);
    let events = objects
        .iter()
        .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "default")
        .expect("events Role");
    assert_eq!(
        rule_set(events),
        triples("events.k8s.io", &["events"], &["create", "patch"])
    );
    let leases = get(&objects, "Role", "mosc-guard-leader-election");
    assert_eq!(
        rule_set(leases),
        triples(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update"]
        )
    );
    assert_eq!(granted_to_guard(&objects).len(), cluster.len() + 2 + 3);

    // The Deployment.
    let deployment = get(&objects, "Deployment", NAME);
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], NAME);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let term = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        term["labelSelector"]["matchLabels"],
        spec["selector"]["matchLabels"]
    );
    let c = container(&objects);
    assert_eq!(c["args"], json!(SERVE_ARGS));
    // kubelet must not kill the guard while it drains (delay) and finishes in-flight reviews
    // (grace) after SIGTERM.
    let seconds_of = |flag: &str| -> u64 {
        SERVE_ARGS
            .iter()
            .find_map(|a| a.strip_prefix(flag)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} in {SERVE_ARGS:?}"))
    };
    let termination = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(
        termination > seconds_of("--shutdown-delay") + seconds_of("--shutdown-grace"),
        "terminationGracePeriodSeconds {termination} must exceed --shutdown-delay + --shutdown-grace"
    );
    assert_eq!(
        c["env"],
        json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "MOSC_GUARD_MCO_USER", "value": MOB},
        ])
    );
    assert_eq!(
        c["ports"],
        json!([
            {"name": "https", "containerPort": 8443, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9443, "protocol": "TCP"}
        ])
    );
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"path": path, "port": "metrics", "scheme": "HTTPS"}),
            "{probe}"
        );
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"], json!({"drop": ["ALL"]}));
    let resources = &c["resources"];
    assert!(
        resources["requests"]["cpu"].is_string() && resources["requests"]["memory"].is_string()
    );
    assert!(resources["limits"]["memory"].is_string(), "{resources}");
    assert!(
        resources["limits"].get("cpu").is_none(),
        "no CPU limit: {resources}"
    );
    // The certificate files the arguments name are the Secret volume's.
    let mount = &c["volumeMounts"][0];
    assert_eq!(
        mount,
        &json!({"name": "tls", "mountPath": "/etc/mosc-guard/tls", "readOnly": true})
    );
    assert_eq!(tls_secret_name(&objects), "mosc-guard-tls");

    // Service -> pods, PDB -> pods.
    let pod_labels = &spec["template"]["metadata"]["labels"];
    let service = get(&objects, "Service", NAME);
    assert_eq!(&service["spec"]["selector"], pod_labels);
    assert_eq!(
        service["spec"]["ports"],
        json!([
            {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
            {"name": "metrics", "port": 9443, "targetPort": "metrics", "protocol": "TCP"}
        ])
    );
    let pdb = get(&objects, "PodDisruptionBudget", NAME);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], pod_labels);

    // Pod Security: the namespace enforces and warns about "restricted" (the dry-run test
    // shows the API server raises no warning for the Deployment).
    let ns = get(&objects, "Namespace", NAME);
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/warn"],
        "restricted"
    );
}

/// The webhook calls Service `NAMESPACE`/`NAME` on port 443 at `path`.
fn assert_calls_the_service(
    config: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
    path: &str,
) {
    let service = config.service.as_ref().expect("clientConfig.service");
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.path.as_deref(),
            service.port
        ),
        (NAMESPACE, NAME, Some(path), Some(443))
    );
}

#[test]
fn webhook_configurations_are_as_documented() {
    // Through the loader the harness uses to register the guard.
    let config = testkit::manifests::validating_webhook_configuration().expect("validating");
    assert_eq!(config.metadata.name.as_deref(), Some(NAME));
    let webhooks = config.webhooks.expect("webhooks");
    assert_eq!(
        webhooks.len(),
        2,
        "the enforcing webhook and the one observing MCO"
    );
    let w = &webhooks[0];
    assert_eq!(w.name, "deletions.mosc-guard.dev");
    assert_eq!(w.admission_review_versions, ["v1"]);
    assert_calls_the_service(&w.client_config, "/validate");
    assert!(w.client_config.url.is_none() && w.client_config.ca_bundle.is_none());
    let rules = w.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 2);
    let rule = &rules[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[MCO.to_owned()][..]));
    assert_eq!(rule.api_versions.as_deref(), Some(&["v1".to_owned()][..]));
    assert_eq!(rule.operations.as_deref(), Some(&["DELETE".to_owned()][..]));
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["machineosconfigs".to_owned(), "machineosbuilds".to_owned()][..])
    );
    assert_eq!(rule.scope.as_deref(), Some("Cluster"));
    // UPDATEs of MachineOSConfigs, narrowed by matchConditions to those that take the
    // finalizer off an object being deleted (exercised in tests/serve/defer_mode/).
    let rule = &rules[1];
    assert_eq!(rule.api_groups.as_deref(), Some(&[MCO.to_owned()][..]));
    assert_eq!(rule.operations.as_deref(), Some(&["UPDATE".to_owned()][..]));
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["machineosconfigs".to_owned()][..])
    );
    let conditions = w.match_conditions.as_ref().expect("matchConditions");
    assert_eq!(conditions.len(), 2);
    // MCO's own requests never reach the enforcing webhook (docs/policy.md, section 10).
    assert_eq!(
        (
            conditions[0].name.as_str(),
            conditions[0].expression.as_str()
        ),
        (
            "not-mco",
            format!("request.userInfo.username != '{MOB}'").as_str()
        )
    );
    assert!(
        conditions[1]
            .expression
            .starts_with("request.operation == 'DELETE' ||")
            && conditions[1]
                .expression
                .contains("'mosc-guard.dev/wait-for-rollout' in oldObject.metadata.finalizers"),
        "{conditions:?}"
    );
    assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(w.side_effects, "NoneOnDryRun");
    assert_eq!(w.timeout_seconds, Some(10));
    assert_eq!(w.match_policy.as_deref(), Some("Equivalent"));
    // The observing webhook: MCO's deletions only, never refused even when the guard is down.
    let o = &webhooks[1];
    assert_eq!(o.name, "mco-deletions.mosc-guard.dev");
    assert_eq!(
        o.client_config
            .service
            .as_ref()
            .and_then(|s| s.path.as_deref()),
        Some("/validate")
    );
    let rules = o.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].operations.as_deref(),
        Some(&["DELETE".to_owned()][..])
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["machineosconfigs".to_owned(), "machineosbuilds".to_owned()][..])
    );
    let only_mco = o.match_conditions.as_ref().expect("matchConditions");
    assert_eq!(only_mco.len(), 1);
    assert_eq!(
        only_mco[0].expression,
        format!("request.userInfo.username == '{MOB}'")
    );
    assert_eq!(o.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(o.side_effects, "NoneOnDryRun");
    assert!(o.timeout_seconds.is_some_and(|t| t <= 5), "{o:?}");

    let config = testkit::manifests::mutating_webhook_configuration().expect("mutating");
    assert_eq!(config.metadata.name.as_deref(), Some(NAME));
    let webhooks = config.webhooks.expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let w = &webhooks[0];
    assert_eq!(w.name, "finalizers.mosc-guard.dev");
    assert_eq!(w.admission_review_versions, ["v1"]);
    assert_calls_the_service(&w.client_config, "/mutate");
    let rules = w.rules.as_ref().expect("rules");
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[MCO.to_owned()][..]));
    assert_eq!(rule.api_versions.as_deref(), Some(&["v1".to_owned()][..]));
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["machineosconfigs".to_owned()][..])
    );
    assert_eq!(rule.scope.as_deref(), Some("Cluster"));
    assert_eq!(w.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(w.reinvocation_policy.as_deref(), Some("IfNeeded"));
    assert_eq!(w.side_effects, "None");
    assert_eq!(w.timeout_seconds, Some(5));
    assert_eq!(w.match_policy.as_deref(), Some("Equivalent"));
}

#[test]
fn makefile_builds_the_tag_the_manifests_deploy() {
    let makefile = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Makefile"))
        .expect("read Makefile");
    assert!(
        makefile
            .lines()
            .any(|l| l.trim() == "IMAGE ?= quay.io/mosc-guard/mosc-guard:$(VERSION)"),
        "Makefile's IMAGE default"
    );
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/base/kustomization.yaml"
    ))
    .expect("read kustomization");
    assert!(
        base.contains(&format!("newTag: \"{}\"", env!("CARGO_PKG_VERSION"))),
        "manifests/base/kustomization.yaml's newTag is the crate version"
    );
}

/// `components/mco-user`: one value in an overlay sets the MCO user in all three places (the
/// enforcing webhook's exclusion, the observing webhook's selection, the guard's
/// MOSC_GUARD_MCO_USER), and the ConfigMap carrying it is not rendered.
#[test]
fn the_mco_user_component_sets_the_user_everywhere_from_one_value() {
    // kustomize takes only relative paths to other kustomizations: the overlay lives two levels
    // below the repository (target/ exists whatever CARGO_TARGET_DIR says: it is made here).
    let parent = testkit::repo_root().join("target");
    std::fs::create_dir_all(&parent).expect("target/");
    let dir = tempfile::Builder::new()
        .prefix("mco-user-overlay")
        .tempdir_in(&parent)
        .expect("overlay dir");
    let example = testkit::repo_root().join("manifests/components/mco-user/mco-user.example.yaml");
    let text = std::fs::read_to_string(&example).expect("example");
    let user = "system:serviceaccount:mco-elsewhere:image-builder";
    assert!(text.contains(MOB), "the example names the default user");
    std::fs::write(dir.path().join("mco-user.yaml"), text.replace(MOB, user)).expect("write");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        concat!(
            "resources: [../../manifests/overlays/openshift, mco-user.yaml]\n",
            "components: [../../manifests/components/mco-user]\n",
        ),
    )
    .expect("write kustomization");
    let objects = rendered(dir.path().to_str().expect("utf-8 path"));
    let config = get(&objects, "ValidatingWebhookConfiguration", NAME);
    let expressions: Vec<&str> = config["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .flat_map(|w| w["matchConditions"].as_array().into_iter().flatten())
        .map(|c| str_of(&c["expression"], "expression"))
        .filter(|e| e.contains("userInfo"))
        .collect();
    assert_eq!(
        expressions,
        [
            format!("request.userInfo.username != '{user}'"),
            format!("request.userInfo.username == '{user}'")
        ]
    );
    let env = container(&objects)["env"].as_array().expect("env");
    let mco = env
        .iter()
        .find(|e| e["name"] == "MOSC_GUARD_MCO_USER")
        .expect("MOSC_GUARD_MCO_USER");
    assert_eq!(mco["value"], user);
    assert!(
        objects
            .iter()
            .all(|o| o["metadata"]["name"] != "mosc-guard-mco-user"),
        "the local-config ConfigMap stays out of the output"
    );
    // Without the component, every place names the machine-os-builder.
    let base = rendered("overlays/openshift");
    let env = container(&base)["env"].as_array().expect("env").clone();
    assert!(
        env.iter()
            .any(|e| e["name"] == "MOSC_GUARD_MCO_USER" && e["value"] == MOB)
    );
}
