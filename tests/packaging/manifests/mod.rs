//! The deployment manifests (`manifests/`, kustomize) against what they promise.
//!
//! What is validated:
//! - `kubectl kustomize` renders the base and every overlay (the ones manifests/README.md
//!   recommends, including the openshift+defer and cert-manager+defer combinations), and the
//!   rendered objects say what the README and docs/install.md say: the RBAC granted to the
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
//!   deletion fails with "failed calling webhook", as docs/runbooks.md says. Then, in defer
//!   mode with the same token: it takes the Lease, adds its finalizer to the MOSC, holds the
//!   MOSC's deletion while the node needs the image and releases it once the node runs it.
//! - The commands docs/runbooks.md gives for recognising a degraded pool print the degraded
//!   node, its images and the pool's NodeDegraded condition (on objects shaped by hand as MCO
//!   leaves them; the tests do not degrade a pool here).
//!
//! What is not: the behaviour of the real operators (service-ca, cert-manager and its
//! cainjector, prometheus-operator, the platform Prometheus), the scheduler and kubelet (no pod
//! of the Deployment runs here: `tests/node` runs them on a real node), and the container image
//! (nothing here builds it).
//!
//! One test binary: rendering helpers and kubectl against the control plane are here, the tests in
//! modules: [`rendering`] and [`overlays`] (what kustomize renders), [`on_a_cluster`] (server-side
//! dry runs, the NetworkPolicy, the admission policy), [`service_account`] and [`guard_token`] (the
//! guard's own credentials), [`runbooks`] (docs/runbooks.md's commands).

mod guard_token;
mod on_a_cluster;
mod overlays;
mod rendering;
mod runbooks;
mod service_account;

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::guard::{Guard, GuardBin};
use testkit::kubectl::KubectlOutput;
use testkit::manifests::{find, render, render_yaml};

/// Every directory an admin applies, as listed in manifests/README.md.
const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

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

/// A Role's or ClusterRole's rules as (apiGroup, resource, verb) triples, a rule limited to
/// `resourceNames` as one `resource/name` per name; nonResourceURLs are not used by these
/// manifests and fail the test if they appear.
fn rule_set(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut set = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "unexpected rule shape in {}: {rule}",
            role["metadata"]["name"]
        );
        let names: Vec<&str> = rule["resourceNames"]
            .as_array()
            .map(|n| n.iter().map(|n| str_of(n, "resourceName")).collect())
            .unwrap_or_default();
        for group in rule["apiGroups"].as_array().expect("apiGroups") {
            for resource in rule["resources"].as_array().expect("resources") {
                let resource = str_of(resource, "resource");
                let resources: Vec<String> = if names.is_empty() {
                    vec![resource.to_owned()]
                } else {
                    names.iter().map(|n| format!("{resource}/{n}")).collect()
                };
                for resource in &resources {
                    for verb in rule["verbs"].as_array().expect("verbs") {
                        set.insert((
                            str_of(group, "apiGroup").to_owned(),
                            resource.clone(),
                            str_of(verb, "verb").to_owned(),
                        ));
                    }
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
    testkit::users::token_kubeconfig(cp, "mosc-guard-sa", token, Some(NAMESPACE), dir)
        .expect("write kubeconfig")
}

/// A digested pull spec on a registry nobody contacts (the guard only compares references).
/// Applies manifests/base but for its ValidatingWebhookConfiguration, which calls the
/// in-cluster Service: no pods run here, so nothing would answer it.
async fn apply_base_without_webhook(cp: &ControlPlane) {
    let base = rendered("base");
    let objects: Vec<&Value> = base
        .iter()
        .filter(|o| o["kind"] != "ValidatingWebhookConfiguration")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    kubectl_ok(cp, &["apply", "-f", "-"], Some(&list)).await;
}

/// Creates `count` worker nodes on pool worker's rendered config; returns their names.
async fn create_worker_nodes(client: &kube::Client, count: usize) -> Vec<String> {
    use testkit::scenario::{WORKER_ROLE_LABEL, create_nodes, node_names, rendered_config};
    let nodes = node_names(count);
    create_nodes(
        client,
        &nodes,
        WORKER_ROLE_LABEL,
        &rendered_config("worker"),
    )
    .await
    .expect("nodes");
    nodes
}

fn image(hex_byte: &str) -> String {
    testkit::scenario::objects::image(hex_byte)
}

/// Creates MOSC `pool` and a succeeded MachineOSBuild of it whose image is `image`.
async fn create_built_mosc(client: &kube::Client, pool: &str, image: &str) {
    testkit::scenario::objects::create_built_mosc(client, pool, image)
        .await
        .expect("built MachineOSConfig");
}

/// The finalizer of defer mode (src/finalizer.rs).
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";
