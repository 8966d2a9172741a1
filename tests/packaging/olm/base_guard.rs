//! The bundle is manifests/base's guard in deny mode: the Deployment but for OLM's certificate
//! mount and the pinned tag, the RBAC less writes to MachineOSConfigs, the webhook's DELETE
//! rule, only kinds a registry+v1 bundle carries.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use testkit::manifests::render;

use super::{bundle_objects, csv, find, read_yaml};

/// Rules as (apiGroup, resource, verb).
fn rules(rules: &Value) -> BTreeSet<(String, String, String)> {
    let mut set = BTreeSet::new();
    for rule in rules.as_array().expect("rules") {
        for g in rule["apiGroups"].as_array().expect("apiGroups") {
            for r in rule["resources"].as_array().expect("resources") {
                for v in rule["verbs"].as_array().expect("verbs") {
                    set.insert((
                        g.as_str().expect("group").to_owned(),
                        r.as_str().expect("resource").to_owned(),
                        v.as_str().expect("verb").to_owned(),
                    ));
                }
            }
        }
    }
    set
}

#[test]
fn the_bundle_is_the_base_guard_in_deny_mode() {
    let base = render("base").unwrap_or_else(|e| panic!("{e}"));
    let csv = csv();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(csv["metadata"]["name"], format!("mosc-guard.v{version}"));
    assert_eq!(csv["spec"]["version"], version);
    assert_eq!(
        csv["spec"]["installModes"],
        json!([
            {"type": "OwnNamespace", "supported": false},
            {"type": "SingleNamespace", "supported": false},
            {"type": "MultiNamespace", "supported": false},
            {"type": "AllNamespaces", "supported": true},
        ])
    );
    assert_eq!(
        csv["metadata"]["annotations"]["operatorframework.io/suggested-namespace"],
        "mosc-guard"
    );
    let install = &csv["spec"]["install"];
    assert_eq!(install["strategy"], "deployment");

    // The Deployment: the base's, but for the certificate OLM mounts and the pinned tag.
    let deployments = install["spec"]["deployments"]
        .as_array()
        .expect("deployments");
    assert_eq!(deployments.len(), 1);
    assert_eq!(deployments[0]["name"], "mosc-guard");
    let mut want = find(&base, "Deployment", "mosc-guard")["spec"].clone();
    let pod = &mut want["template"]["spec"];
    pod.as_object_mut().expect("pod").remove("volumes");
    let container = &mut pod["containers"][0];
    container
        .as_object_mut()
        .expect("container")
        .remove("volumeMounts");
    container["image"] = json!(format!("quay.io/mosc-guard/mosc-guard:{version}"));
    for arg in container["args"].as_array_mut().expect("args") {
        let replaced = arg.as_str().expect("arg").replace(
            "/etc/mosc-guard/tls/",
            "/tmp/k8s-webhook-server/serving-certs/",
        );
        *arg = json!(replaced);
    }
    assert_eq!(
        deployments[0]["spec"], want,
        "the CSV's Deployment is manifests/base's"
    );
    let args = &deployments[0]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        !args.as_array().expect("args").iter().any(|a| {
            let a = a.as_str().unwrap_or_default();
            a.starts_with("--deletion-mode") || a.starts_with("--enforcement")
        }),
        "deny mode, enforced: {args}"
    );

    // RBAC: the base's ClusterRole, less every write to MachineOSConfigs, plus Events
    // cluster-wide (the base grants them in `default` only); the Lease in its own namespace.
    let base_cluster = rules(&find(&base, "ClusterRole", "mosc-guard")["rules"]);
    let cluster = install["spec"]["clusterPermissions"]
        .as_array()
        .expect("clusterPermissions");
    assert_eq!(cluster.len(), 1);
    assert_eq!(cluster[0]["serviceAccountName"], "mosc-guard");
    let granted = rules(&cluster[0]["rules"]);
    let mut want: BTreeSet<_> = base_cluster
        .iter()
        .filter(|(_, _, verb)| !["patch", "update", "create", "delete"].contains(&verb.as_str()))
        .cloned()
        .collect();
    let events = rules(&find(&base, "Role", "mosc-guard-events")["rules"]);
    want.extend(events.iter().cloned());
    assert_eq!(granted, want);
    assert!(
        !granted
            .iter()
            .any(|(g, _, v)| g == "machineconfiguration.openshift.io"
                && v != "get"
                && v != "list"
                && v != "watch"),
        "no write to any MCO object: {granted:?}"
    );
    let namespaced = install["spec"]["permissions"]
        .as_array()
        .expect("permissions");
    assert_eq!(namespaced.len(), 1);
    assert_eq!(
        rules(&namespaced[0]["rules"]),
        rules(&find(&base, "Role", "mosc-guard-leader-election")["rules"])
    );

    // The webhook: the base's DELETE rule, failure policy, side effects, timeout and path.
    let base_webhook = &find(&base, "ValidatingWebhookConfiguration", "mosc-guard")["webhooks"][0];
    let hooks = csv["spec"]["webhookdefinitions"]
        .as_array()
        .expect("webhookdefinitions");
    assert_eq!(hooks.len(), 1, "validating only (deny mode)");
    let hook = &hooks[0];
    assert_eq!(hook["type"], "ValidatingAdmissionWebhook");
    assert_eq!(hook["generateName"], base_webhook["name"]);
    assert_eq!(hook["deploymentName"], "mosc-guard");
    assert_eq!(hook["targetPort"], 8443);
    assert_eq!(
        hook["webhookPath"],
        base_webhook["clientConfig"]["service"]["path"]
    );
    for field in [
        "admissionReviewVersions",
        "failurePolicy",
        "matchPolicy",
        "sideEffects",
        "timeoutSeconds",
    ] {
        assert_eq!(hook[field], base_webhook[field], "{field}");
    }
    let delete_rules: Vec<&Value> = base_webhook["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| r["operations"] == json!(["DELETE"]))
        .collect();
    assert_eq!(
        hook["rules"],
        json!(delete_rules),
        "the DELETE rule, and no UPDATE rule"
    );
    assert!(hook.get("matchConditions").is_none());

    // Only kinds a registry+v1 bundle carries; no Namespace, no admission policy, no webhook
    // configuration of its own (OLM makes it from webhookdefinitions).
    let supported = [
        "ClusterServiceVersion",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "PrometheusRule",
        "ServiceMonitor",
        "PriorityClass",
    ];
    for (file, object) in bundle_objects() {
        let kind = object["kind"].as_str().expect("kind");
        assert!(supported.contains(&kind), "{file}: {kind} in a bundle");
        assert!(
            object["metadata"].get("namespace").is_none(),
            "{file}: OLM picks the namespace"
        );
    }
    let pdb = bundle_objects()
        .into_iter()
        .find(|(_, o)| o["kind"] == "PodDisruptionBudget")
        .expect("a PodDisruptionBudget")
        .1;
    assert_eq!(
        pdb["spec"],
        find(&base, "PodDisruptionBudget", "mosc-guard")["spec"]
    );
    // The NetworkPolicy kept beside the bundle is the openshift overlay's.
    let openshift = render("overlays/openshift").unwrap_or_else(|e| panic!("{e}"));
    let extra = read_yaml("bundle/extras/networkpolicy.yaml");
    assert_eq!(
        extra["spec"],
        find(&openshift, "NetworkPolicy", "mosc-guard")["spec"]
    );
}
