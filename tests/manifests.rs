//! The deployment manifests (`manifests/`, kustomize) against what they promise.
//!
//! What is validated:
//! - `kubectl kustomize` renders the base and every overlay (the ones manifests/README.md
//!   recommends, including the openshift+defer and cert-manager+defer combinations), and the
//!   rendered objects say what the README and docs/operations.md say: the RBAC granted to the
//!   ServiceAccount (identical in every overlay), the Deployment's arguments, security context,
//!   probes and image tag (the crate version, as `make image` tags it), the webhook
//!   configurations field by field, the CA wiring of each overlay (service-ca annotations and
//!   the ServiceMonitor; cert-manager's issuer chain and `inject-ca-from`), and that every
//!   reference between objects resolves (Service -> pods, webhooks -> Service, Secret names).
//! - Every rendered object passes `kubectl apply --dry-run=server --validate=strict` on a real
//!   kube-apiserver: built-in kinds against the API server's own validation (and Pod Security
//!   "restricted", which the namespace warns about), ServiceMonitor, PrometheusRule, Issuer and
//!   Certificate against the test CRDs in `tests/crds/thirdparty/`. Those declare only the
//!   fields the manifests use, with the upstream names, types and enums and no
//!   preserve-unknown-fields, so a misspelt field fails (checked here by misspelling four on
//!   purpose).
//! - With the ServiceAccount's own token: `kubectl auth can-i` answers yes where the guard
//!   needs it and no for secrets, node writes, MOSC deletion and leases or events outside
//!   the two granted namespaces; and the real guard, running with that token, becomes ready
//!   (every watch works), denies a deletion that must be denied (also as a server-side dry run)
//!   and records the DeletionBlocked Event in `default`, allows (after its confirming fresh
//!   read) one that must be allowed, and logs nothing "forbidden". Once it is stopped, the
//!   deletion fails with "failed calling webhook", as docs/operations.md says. Then, in defer
//!   mode with the same token: it takes the Lease, adds its finalizer to the MOSC, holds the
//!   MOSC's deletion while the node needs the image and releases it once the node runs it.
//! - The commands docs/operations.md gives for recognising a degraded pool print the degraded
//!   node, its images and the pool's NodeDegraded condition (on objects shaped by hand as MCO
//!   leaves them; the tests do not degrade a pool here).
//!
//! What is not: the behaviour of the real operators (service-ca, cert-manager and its
//! cainjector, prometheus-operator, the platform Prometheus), the scheduler and kubelet (no pod
//! of the Deployment runs here: there is no controller-manager), and the container image
//! (nothing here builds it).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use support::controlplane::ControlPlane;
use support::guard::Guard;
use support::kubectl::KubectlOutput;
use support::manifests::{find, render, render_yaml};

/// Every directory an admin applies, as listed in manifests/README.md.
const DIRS: &[&str] = &[
    "base",
    "overlays/openshift",
    "overlays/cert-manager",
    "overlays/defer",
    "overlays/openshift-defer",
    "overlays/cert-manager-defer",
];

/// The overlays that run the guard in defer mode.
const DEFER_DIRS: &[&str] = &[
    "overlays/defer",
    "overlays/openshift-defer",
    "overlays/cert-manager-defer",
];

const NAMESPACE: &str = "mosc-guard";
const NAME: &str = "mosc-guard";
const MCO: &str = "machineconfiguration.openshift.io";
/// The ValidatingAdmissionPolicy (and its binding) that bounds the guard's own token.
const VAP: &str = "mosc-guard-finalizer-only";

/// `serve`'s arguments in deny mode (the defer overlays append `--deletion-mode=defer`).
const SERVE_ARGS: &[&str] = &[
    "serve",
    "--listen=0.0.0.0:8443",
    "--tls-cert-file=/etc/mosc-guard/tls/tls.crt",
    "--tls-key-file=/etc/mosc-guard/tls/tls.key",
    "--policy=in-flight",
    "--request-timeout=8",
    "--confirm-timeout=5",
    "--shutdown-delay=10",
    "--shutdown-grace=20",
    "--log-format=json",
    "--metrics-listen=0.0.0.0:9443",
];

fn rendered(dir: &str) -> Vec<Value> {
    render(dir).unwrap_or_else(|e| panic!("{e}"))
}

fn get<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(objects, kind, name).unwrap_or_else(|e| panic!("{e}"))
}

fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| o["kind"] == kind)
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

/// (kind, namespace, name) of an object.
fn key(o: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&o["kind"]),
        text(&o["metadata"]["namespace"]),
        text(&o["metadata"]["name"]),
    )
}

/// A Role's or ClusterRole's rules as (apiGroup, resource, verb) triples; resourceNames and
/// nonResourceURLs are not used by these manifests and fail the test if they appear.
fn rule_set(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut set = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        assert!(
            rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none(),
            "unexpected rule shape in {}: {rule}",
            role["metadata"]["name"]
        );
        for group in rule["apiGroups"].as_array().expect("apiGroups") {
            for resource in rule["resources"].as_array().expect("resources") {
                for verb in rule["verbs"].as_array().expect("verbs") {
                    set.insert((
                        str_of(group, "apiGroup").to_owned(),
                        str_of(resource, "resource").to_owned(),
                        str_of(verb, "verb").to_owned(),
                    ));
                }
            }
        }
    }
    set
}

fn triples(group: &str, resources: &[&str], verbs: &[&str]) -> BTreeSet<(String, String, String)> {
    let mut set = BTreeSet::new();
    for r in resources {
        for v in verbs {
            set.insert((group.to_owned(), (*r).to_owned(), (*v).to_owned()));
        }
    }
    set
}

/// Everything the rendered bindings grant ServiceAccount mosc-guard/mosc-guard:
/// (scope, apiGroup, resource, verb), scope being "cluster" or the Role's namespace.
fn granted_to_guard(objects: &[Value]) -> BTreeSet<(String, String, String, String)> {
    let mut granted = BTreeSet::new();
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
        let binds_guard = subjects.iter().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == NAME && s["namespace"] == NAMESPACE
        });
        if !binds_guard {
            continue;
        }
        let role_kind = str_of(&binding["roleRef"]["kind"], "roleRef.kind");
        let role_name = str_of(&binding["roleRef"]["name"], "roleRef.name");
        let (scope, role) = if binding["kind"] == "ClusterRoleBinding" {
            assert_eq!(role_kind, "ClusterRole", "{binding}");
            ("cluster".to_owned(), get(objects, "ClusterRole", role_name))
        } else {
            let ns = str_of(&binding["metadata"]["namespace"], "namespace").to_owned();
            assert_eq!(
                role_kind, "Role",
                "bindings of the guard use Roles: {binding}"
            );
            let role = objects
                .iter()
                .find(|o| {
                    o["kind"] == "Role"
                        && o["metadata"]["name"] == role_name
                        && o["metadata"]["namespace"] == ns
                })
                .unwrap_or_else(|| {
                    panic!("RoleBinding {binding} names a Role that is not rendered")
                });
            (ns, role)
        };
        for (g, r, v) in rule_set(role) {
            granted.insert((scope.clone(), g, r, v));
        }
    }
    granted
}

/// The webhook configurations of a render (Validating and Mutating).
fn webhook_configurations(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .filter(|o| {
            o["kind"] == "ValidatingWebhookConfiguration"
                || o["kind"] == "MutatingWebhookConfiguration"
        })
        .collect()
}

fn container(objects: &[Value]) -> &Value {
    &get(objects, "Deployment", NAME)["spec"]["template"]["spec"]["containers"][0]
}

fn tls_secret_name(objects: &[Value]) -> &str {
    let volumes = &get(objects, "Deployment", NAME)["spec"]["template"]["spec"]["volumes"];
    let tls = volumes
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "tls")
        .expect("volume tls");
    str_of(&tls["secret"]["secretName"], "tls secretName")
}

/// `"<service>.<namespace>.svc"`, the name the API server and Prometheus verify.
fn service_dns_name() -> String {
    format!("{NAME}.{NAMESPACE}.svc")
}

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

#[test]
fn webhook_configurations_are_as_documented() {
    // Through the loader the harness uses to register the guard.
    let config = support::manifests::validating_webhook_configuration().expect("validating");
    assert_eq!(config.metadata.name.as_deref(), Some(NAME));
    let webhooks = config.webhooks.expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let w = &webhooks[0];
    assert_eq!(w.name, "deletions.mosc-guard.dev");
    assert_eq!(w.admission_review_versions, ["v1"]);
    let service = w
        .client_config
        .service
        .as_ref()
        .expect("clientConfig.service");
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.path.as_deref(),
            service.port
        ),
        (NAMESPACE, NAME, Some("/validate"), Some(443))
    );
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
    // finalizer off an object being deleted (exercised in tests/defer_mode.rs).
    let rule = &rules[1];
    assert_eq!(rule.api_groups.as_deref(), Some(&[MCO.to_owned()][..]));
    assert_eq!(rule.operations.as_deref(), Some(&["UPDATE".to_owned()][..]));
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["machineosconfigs".to_owned()][..])
    );
    let conditions = w.match_conditions.as_ref().expect("matchConditions");
    assert_eq!(conditions.len(), 1);
    assert!(
        conditions[0]
            .expression
            .starts_with("request.operation == 'DELETE' ||")
            && conditions[0]
                .expression
                .contains("'mosc-guard.dev/wait-for-rollout' in oldObject.metadata.finalizers"),
        "{conditions:?}"
    );
    assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(w.side_effects, "NoneOnDryRun");
    assert_eq!(w.timeout_seconds, Some(10));
    assert_eq!(w.match_policy.as_deref(), Some("Equivalent"));

    let config = support::manifests::mutating_webhook_configuration().expect("mutating");
    assert_eq!(config.metadata.name.as_deref(), Some(NAME));
    let webhooks = config.webhooks.expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let w = &webhooks[0];
    assert_eq!(w.name, "finalizers.mosc-guard.dev");
    assert_eq!(w.admission_review_versions, ["v1"]);
    let service = w
        .client_config
        .service
        .as_ref()
        .expect("clientConfig.service");
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.path.as_deref(),
            service.port
        ),
        (NAMESPACE, NAME, Some("/mutate"), Some(443))
    );
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
    // Its alerts live beside it (their content: tests/alerts.rs).
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

// ---------------------------------------------------------------------------------------------
// On a real API server.

/// Runs kubectl as the admin and panics if it cannot run.
async fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> KubectlOutput {
    cp.kubectl_with_stdin(args, stdin)
        .await
        .unwrap_or_else(|e| panic!("running kubectl {}: {e}", args.join(" ")))
}

/// Runs kubectl as the admin and panics unless it succeeded.
async fn kubectl_ok(cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> KubectlOutput {
    let out = kubectl(cp, args, stdin).await;
    assert!(
        out.success(),
        "kubectl {} failed: {}",
        args.join(" "),
        out.stderr
    );
    out
}

/// Installs the third-party test CRDs (ServiceMonitor, PrometheusRule, Issuer, Certificate) and
/// waits until
/// the API server serves them.
async fn install_thirdparty_crds(cp: &ControlPlane) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/crds/thirdparty");
    kubectl_ok(cp, &["apply", "--server-side", "-f", dir], None).await;
    kubectl_ok(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/servicemonitors.monitoring.coreos.com",
            "crd/prometheusrules.monitoring.coreos.com",
            "crd/issuers.cert-manager.io",
            "crd/certificates.cert-manager.io",
        ],
        None,
    )
    .await;
}

/// The rendered Namespace object(s) of `dir`, as JSON for `kubectl apply -f -`.
fn namespaces_json(objects: &[Value]) -> String {
    let items: Vec<&Value> = of_kind(objects, "Namespace").collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_pass_server_side_dry_run() {
    let cp = ControlPlane::start().await.expect("control plane");
    install_thirdparty_crds(&cp).await;

    // A server-side dry run of a namespaced object fails with "namespaces not found" unless its
    // namespace exists, and the dry run of the Namespace itself creates nothing. So the
    // namespace is created for real first (`default`, the other namespace used, always exists).
    let base = rendered("base");
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&namespaces_json(&base))).await;

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

/// A kubeconfig for the ServiceAccount mosc-guard/mosc-guard: a TokenRequest token, and the
/// server URL and CA of the control plane (the same the admin kubeconfig names).
async fn service_account_kubeconfig(
    cp: &ControlPlane,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let out = kubectl_ok(
        cp,
        &["create", "token", NAME, "-n", NAMESPACE, "--duration=1h"],
        None,
    )
    .await;
    let token = out.stdout.trim();
    assert!(!token.is_empty(), "kubectl create token printed nothing");
    let path = dir.join("mosc-guard-sa.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
             users:\n- name: mosc-guard\n  user:\n    token: {token}\n\
             contexts:\n- name: mosc-guard\n  context:\n    cluster: e2e\n    user: mosc-guard\n    namespace: {NAMESPACE}\n\
             current-context: mosc-guard\n",
            server = cp.server(),
            ca = cp.pki().ca_path().display(),
        ),
    )
    .expect("write kubeconfig");
    path
}

/// A digested pull spec on a registry nobody contacts (the guard only compares references).
fn image(hex_byte: &str) -> String {
    support::objects::image(hex_byte)
}

/// Creates MOSC `pool` and a succeeded MachineOSBuild of it whose image is `image`.
async fn create_built_mosc(client: &kube::Client, pool: &str, image: &str) {
    support::objects::create_built_mosc(client, pool, image)
        .await
        .expect("built MachineOSConfig");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_rbac_is_least_privilege_and_enough_for_the_guard() {
    use support::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DONE, STATE_WORKING};
    use support::scenario::{
        WORKER_ROLE_LABEL, create_nodes, create_pool, node_names, rendered_config,
    };

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();

    // The base for real, except its webhook configuration: that one calls the in-cluster
    // Service, which has no endpoints here (no pods run); the guard started below is
    // registered in its place.
    let base = rendered("base");
    let objects: Vec<&Value> = base
        .iter()
        .filter(|o| o["kind"] != "ValidatingWebhookConfiguration")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&list)).await;

    let dir = support::temp_dir("mosc-guard-sa-").expect("temp dir");
    let kubeconfig = service_account_kubeconfig(&cp, dir.path()).await;
    let cache = dir.path().join("kubectl-cache");
    let as_guard = |args: Vec<String>| {
        let (kubeconfig, cache) = (kubeconfig.clone(), cache.clone());
        async move {
            support::kubectl::run(&kubeconfig, &cache, &args, None)
                .await
                .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
        }
    };

    // These are the ServiceAccount's own credentials.
    let out = as_guard(vec![
        "auth".into(),
        "whoami".into(),
        "-o".into(),
        "jsonpath={.status.userInfo.username}".into(),
    ])
    .await;
    assert_eq!(
        out.stdout.trim(),
        "system:serviceaccount:mosc-guard:mosc-guard",
        "{out:?}"
    );

    let mosc = "machineosconfigs.machineconfiguration.openshift.io";
    let mosb = "machineosbuilds.machineconfiguration.openshift.io";
    let mcp = "machineconfigpools.machineconfiguration.openshift.io";
    let events = "events.events.k8s.io";
    let leases = "leases.coordination.k8s.io";
    let allowed: &[&[&str]] = &[
        &["get", "nodes"],
        &["list", "nodes"],
        &["watch", "nodes"],
        &["list", mosc],
        &["watch", mosc],
        &["patch", mosc],
        &["list", mosb],
        &["watch", mosb],
        &["list", mcp],
        &["watch", mcp],
        &["create", events, "-n", "default"],
        &["patch", events, "-n", "default"],
        &["get", leases, "-n", NAMESPACE],
        &["create", leases, "-n", NAMESPACE],
        &["update", leases, "-n", NAMESPACE],
    ];
    let denied: &[&[&str]] = &[
        &["get", "secrets", "--all-namespaces"],
        &["get", "secrets", "-n", NAMESPACE],
        &["list", "secrets", "-n", "default"],
        &["patch", "nodes"],
        &["update", "nodes"],
        &["delete", "nodes"],
        &["delete", mosc],
        &["update", mosc],
        &["patch", mosc, "--subresource=status"],
        &["delete", mosb],
        &["patch", mosb],
        &["patch", mcp],
        &["create", leases, "-n", "kube-system"],
        &["update", leases, "-n", "kube-node-lease"],
        &["create", events, "-n", "kube-system"],
        &["create", "events", "-n", "default"],
        &["create", "pods", "-n", NAMESPACE],
        &[
            "create",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ],
    ];
    for (cases, want) in [(allowed, "yes"), (denied, "no")] {
        for case in cases {
            let mut args = vec!["auth".to_owned(), "can-i".to_owned()];
            args.extend(case.iter().map(|a| (*a).to_owned()));
            let out = as_guard(args).await;
            assert_eq!(
                out.stdout.trim(),
                want,
                "can-i {} as the ServiceAccount: {out:?}",
                case.join(" ")
            );
        }
    }

    // A minimal situation, written as the admin: pool worker has a node rolling to the image
    // of MOSC worker's build; pool infra's MOSC has a build whose image no node uses. (Both
    // MOSCs push to one repository, as pools often do: the builds, not the repository, say
    // which image is whose.)
    let (worker_image, infra_image) = (image("1f"), image("2e"));
    create_pool(&client, "worker", WORKER_ROLE_LABEL, 1)
        .await
        .expect("pool worker");
    create_pool(&client, "infra", "node-role.kubernetes.io/infra", 1)
        .await
        .expect("pool infra");
    let nodes = node_names(2);
    create_nodes(
        &client,
        &nodes,
        WORKER_ROLE_LABEL,
        &rendered_config("worker"),
    )
    .await
    .expect("nodes");
    for (pool, image) in [("worker", &worker_image), ("infra", &infra_image)] {
        create_built_mosc(&client, pool, image).await;
    }
    mco::nodes(&client)
        .patch(
            &nodes[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                DESIRED_IMAGE: worker_image,
                STATE: STATE_WORKING,
            }}})),
        )
        .await
        .expect("node rolling");

    // The real guard with the ServiceAccount's token: ready means every watch lists.
    let mut guard = Guard::start_as(&cp, &kubeconfig, &[])
        .await
        .expect("mosc-guard starts with the ServiceAccount's credentials");
    // Registered from manifests/base through support::manifests, pointed at this guard.
    support::guard::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");

    // docs/operations.md, "Verify": a server-side dry run shows the same denial.
    let out = kubectl(
        &cp,
        &["delete", "machineosconfig", "worker", "--dry-run=server"],
        None,
    )
    .await;
    assert!(
        !out.success()
            && out
                .stderr
                .contains("admission webhook \"deletions.mosc-guard.dev\" denied the request"),
        "{out:?}"
    );
    let out = kubectl(&cp, &["delete", "machineosconfig", "worker"], None).await;
    assert!(
        !out.success(),
        "deleting worker's MOSC must be refused: {out:?}"
    );
    assert!(
        out.stderr
            .contains("admission webhook \"deletions.mosc-guard.dev\" denied the request")
            && out.stderr.contains(&nodes[0]),
        "{}",
        out.stderr
    );
    let out = kubectl(&cp, &["delete", "machineosconfig", "infra"], None).await;
    assert!(
        out.success(),
        "deleting infra's MOSC must be allowed: {out:?}"
    );

    // The refusal was recorded as an Event in `default` with the ServiceAccount's grant there.
    support::scenario::wait_for(
        || async {
            let out = kubectl(
                &cp,
                &[
                    "get",
                    "events.events.k8s.io",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={range .items[*]}{.reason} {.regarding.name}{\"\\n\"}{end}",
                ],
                None,
            )
            .await;
            Ok(out
                .stdout
                .lines()
                .any(|l| l == "DeletionBlocked worker")
                .then_some(()))
        },
        Duration::from_secs(10),
        "a DeletionBlocked Event about MOSC worker in namespace default",
    )
    .await
    .expect("Event recorded");

    // The allow was confirmed by a fresh read (node list, MOSB list) with these credentials.
    let metrics = guard
        .https_client()
        .expect("client")
        .get(format!("{}/metrics", guard.base_url()))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body");
    // Sum of a counter over the series whose labels include `label`.
    let count = |name: &str, label: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let decisions = "mosc_guard_admission_decisions_total";
    assert_eq!(
        (
            count(decisions, "result=\"denied\""),
            count(decisions, "result=\"allowed\""),
            count("mosc_guard_confirmations_total", "result=\"confirmed\""),
        ),
        (2.0, 1.0, 1.0),
        "two denials (dry run and real), one allow confirmed by a fresh read:\n{metrics}"
    );

    guard.stop();
    assert_nothing_forbidden(&guard);

    // docs/operations.md, "When mosc-guard is down": with no guard answering, the deletion is
    // refused by the API server itself (failurePolicy Fail).
    let out = kubectl(&cp, &["delete", "machineosconfig", "worker"], None).await;
    assert!(
        !out.success()
            && out
                .stderr
                .contains("failed calling webhook \"deletions.mosc-guard.dev\""),
        "{out:?}"
    );

    // Defer mode with the same credentials exercises the grants only it uses: the Lease
    // (leader election in mosc-guard) and patching MOSC finalizers. Its admission policy lets
    // the ServiceAccount add the finalizer too (the base's only lets it remove it).
    let defer = rendered("overlays/defer");
    let policy = get(&defer, "ValidatingAdmissionPolicy", VAP).to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&policy)).await;
    // The API server applies a changed policy after a moment: wait until a server-side dry run
    // of the guard's own finalizer patch passes, so the guard's first patch is not refused.
    support::scenario::wait_for(
        || async {
            let out = as_guard(vec![
                "patch".into(),
                "machineosconfig".into(),
                "worker".into(),
                "--type=merge".into(),
                "--dry-run=server".into(),
                "-p".into(),
                format!(r#"{{"metadata":{{"finalizers":["{FINALIZER}"]}}}}"#),
            ])
            .await;
            Ok(out.success().then_some(()))
        },
        Duration::from_secs(30),
        "the defer-mode admission policy to be in force",
    )
    .await
    .expect("policy in force");
    let mut guard = Guard::start_as(&cp, &kubeconfig, &["--deletion-mode=defer"])
        .await
        .expect("mosc-guard starts in defer mode with the ServiceAccount's credentials");
    support::guard::register_validating_webhook(&cp, &guard)
        .await
        .expect("webhook registered");
    let finalizers = |name: &'static str| {
        let client = client.clone();
        async move {
            let mosc = mco::moscs(&client).get_opt(name).await?;
            Ok::<_, support::Error>(mosc.map(|m| {
                let deleting = m.metadata.deletion_timestamp.is_some();
                (m.metadata.finalizers.unwrap_or_default(), deleting)
            }))
        }
    };
    // The Lease holder's finalizer controller adopts the existing MOSC (a patch).
    support::scenario::wait_for(
        || async {
            Ok(finalizers("worker")
                .await?
                .filter(|(f, _)| f.iter().any(|f| f == FINALIZER))
                .map(|_| ()))
        },
        Duration::from_secs(30),
        "the guard to add its finalizer to MOSC worker",
    )
    .await
    .expect("finalizer added");
    let out = kubectl_ok(
        &cp,
        &[
            "get",
            "lease",
            "mosc-guard",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    )
    .await;
    assert!(!out.stdout.trim().is_empty(), "the Lease has a holder");
    // The deletion is accepted and held while the node still needs the image ...
    kubectl_ok(
        &cp,
        &["delete", "machineosconfig", "worker", "--wait=false"],
        None,
    )
    .await;
    let (_, deleting) = finalizers("worker")
        .await
        .expect("read MOSC")
        .expect("MOSC worker still exists");
    assert!(deleting, "MOSC worker is held by the finalizer");
    // ... and released (a patch removing the finalizer) once every node of the pool runs it.
    for node in &nodes {
        mco::nodes(&client)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    DESIRED_IMAGE: worker_image, CURRENT_IMAGE: worker_image, STATE: STATE_DONE,
                }}})),
            )
            .await
            .expect("node reached the image");
    }
    support::scenario::wait_for(
        || async { Ok(finalizers("worker").await?.is_none().then_some(())) },
        Duration::from_secs(30),
        "the guard to release MOSC worker",
    )
    .await
    .expect("deferred deletion completed");
    guard.stop();
    assert_nothing_forbidden(&guard);
}

/// The finalizer of defer mode (src/finalizer.rs).
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

/// Fails if the guard's log mentions anything "forbidden" (an RBAC refusal).
fn assert_nothing_forbidden(guard: &Guard) {
    let log = std::fs::read_to_string(guard.log_path()).expect("guard log");
    let forbidden: Vec<&str> = log
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect();
    assert!(
        forbidden.is_empty(),
        "the guard was refused something:\n{}",
        forbidden.join("\n")
    );
}

/// The jsonpath expressions of docs/operations.md, "Recognising a pool already degraded".
const DEGRADED_NODES: &str = r#"{range .items[?(@.metadata.annotations.machineconfiguration\.openshift\.io/state=="Degraded")]}{.metadata.name}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/reason}{"\n"}{end}"#;
const NODE_IMAGES: &str = r#"{range .items[*]}{.metadata.name}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/state}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/desiredImage}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/currentImage}{"\n"}{end}"#;
const POOL_NODE_DEGRADED: &str = r#"{range .status.conditions[?(@.type=="NodeDegraded")]}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}"#;

/// The commands docs/operations.md gives for recognising a degraded pool print what it says,
/// on objects shaped as MCO 4.20 leaves them (node annotations, pool condition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_md_commands_find_a_degraded_node() {
    use support::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, REASON, STATE, STATE_DEGRADED};
    use support::scenario::{
        WORKER_ROLE_LABEL, create_nodes, create_pool, node_names, rendered_config,
    };

    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("read docs/operations.md");
    for expr in [DEGRADED_NODES, NODE_IMAGES, POOL_NODE_DEGRADED] {
        assert!(
            docs.contains(&format!("-o jsonpath='{expr}'")),
            "docs/operations.md no longer shows {expr}"
        );
    }

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    create_pool(&client, "worker", WORKER_ROLE_LABEL, 1)
        .await
        .expect("pool");
    let nodes = node_names(2);
    create_nodes(
        &client,
        &nodes,
        WORKER_ROLE_LABEL,
        &rendered_config("worker"),
    )
    .await
    .expect("nodes");
    let (deleted, running) = (image("3d"), image("4c"));
    let reason = format!(
        "error running rpm-ostree rebase --experimental ostree-unverified-registry:{deleted}: \
         error: reading manifest sha256:{} in {}: manifest unknown",
        "3d".repeat(32),
        deleted.split_once('@').expect("digest").0
    );
    mco::nodes(&client)
        .patch(
            &nodes[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                STATE: STATE_DEGRADED, REASON: reason,
                DESIRED_IMAGE: deleted, CURRENT_IMAGE: running,
            }}})),
        )
        .await
        .expect("degrade node");
    let message =
        "Node ip-10-0-11-240.us-east-2.compute.internal is reporting: \"manifest unknown\"";
    mco::mcps(&client)
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"degradedMachineCount": 1, "conditions": [{
                    "type": "NodeDegraded", "status": "True",
                    "reason": "1 nodes are reporting degraded status on sync",
                    "message": message, "lastTransitionTime": "2026-11-30T00:00:00Z",
                }]}}),
            ),
        )
        .await
        .expect("pool status");

    let jsonpath = |expr: &str| format!("jsonpath={expr}");
    let out = kubectl_ok(
        &cp,
        &["get", "nodes", "-o", &jsonpath(DEGRADED_NODES)],
        None,
    )
    .await;
    assert_eq!(out.stdout, format!("{}\t{reason}\n", nodes[0]));
    let out = kubectl_ok(&cp, &["get", "nodes", "-o", &jsonpath(NODE_IMAGES)], None).await;
    assert_eq!(
        out.stdout,
        format!(
            "{}\tDegraded\t{deleted}\t{running}\n{}\tDone\t\t\n",
            nodes[0], nodes[1]
        )
    );
    let out = kubectl_ok(
        &cp,
        &["get", "mcp", "worker", "-o", &jsonpath(POOL_NODE_DEGRADED)],
        None,
    )
    .await;
    assert_eq!(
        out.stdout,
        format!("True\t1 nodes are reporting degraded status on sync\t{message}\n")
    );
    kubectl_ok(&cp, &["get", "mcp"], None).await;
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

/// Runs kubectl with the ServiceAccount's kubeconfig.
async fn kubectl_as(kubeconfig: &std::path::Path, args: &[&str]) -> KubectlOutput {
    let cache = kubeconfig.with_extension("cache");
    support::kubectl::run(kubeconfig, &cache, args, None)
        .await
        .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
}

/// Item 2 of the hardening: a stolen guard token may patch MachineOSConfigs (RBAC cannot say
/// "only finalizers"), so the ValidatingAdmissionPolicy must refuse everything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_token_can_change_only_its_finalizer() {
    let cp = ControlPlane::start().await.expect("control plane");
    // The base for real (deny mode's policy), without the webhook configuration: no guard runs.
    let base = rendered("base");
    let objects: Vec<&Value> = base
        .iter()
        .filter(|o| o["kind"] != "ValidatingWebhookConfiguration")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    kubectl_ok(&cp, &["apply", "-f", "-"], Some(&list)).await;
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
    let dir = support::temp_dir("mosc-guard-vap-").expect("temp dir");
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
