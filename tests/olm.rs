//! The OLM bundle (`bundle/`, registry+v1) against what OLM reads and what it promises.
//!
//! - `opm` (operator-registry, built from its Go module by `hack/build-binaries.sh`) renders
//!   the bundle directory (package `mosc-guard`, version = the crate's, every manifest as a
//!   bundle object) and validates a one-bundle file-based catalog made of it (package, channel
//!   `alpha`, the rendered bundle); a catalog whose channel names no bundle fails, so the
//!   validation can fail.
//! - The ClusterServiceVersion passes `kubectl apply --dry-run=server --validate=strict` against
//!   the published ClusterServiceVersion CRD (`crds/` of the operator-framework/api module
//!   `hack/opm/go.mod` pins, read from the Go module cache, not copied here) on a real API
//!   server, without warnings; a misspelt field is refused; the PodDisruptionBudget passes too.
//! - It is manifests/base's guard, deny mode: the Deployment is the base's but for the
//!   certificate OLM mounts (no Secret volume; `--tls-*-file` under
//!   `/tmp/k8s-webhook-server/serving-certs`) and a pinned image tag; the webhook is the base's
//!   DELETE rule with the same failure policy, side effects, timeout and path; the
//!   ServiceAccount gets the base's ClusterRole less `patch` (no write to any MachineOSConfig)
//!   plus Events cluster-wide, and the Lease in its own namespace; AllNamespaces only; no
//!   kind a bundle cannot carry.
//!
//! Not checked: OLM itself (not run here): that it makes the webhook's Service and certificate,
//! and installs the bundle.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::manifests::{parse_documents, render};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CSV_FILE: &str = "bundle/manifests/mosc-guard.clusterserviceversion.yaml";

/// opm, built (once, cached) by hack/build-binaries.sh.
fn opm() -> PathBuf {
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("hack/build-binaries.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run hack/build-binaries.sh");
    assert!(out.status.success(), "hack/build-binaries.sh failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("opm="))
        .unwrap_or_else(|| panic!("no opm= line: {stdout}"));
    PathBuf::from(path)
}

/// The ClusterServiceVersion CRD operator-framework/api publishes, from the module version
/// `hack/opm/go.mod` pins (downloaded by the Go toolchain if the cache lacks it).
fn csv_crd() -> String {
    let (ok, dir, err) = run(Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            "github.com/operator-framework/api",
        ])
        .current_dir(Path::new(ROOT).join("hack/opm")));
    assert!(
        ok,
        "go mod download github.com/operator-framework/api: {err}"
    );
    let info: Value = serde_json::from_str(&dir).unwrap_or_else(|e| panic!("{e}: {dir}"));
    let dir = info["Dir"]
        .as_str()
        .unwrap_or_else(|| panic!("no Dir: {info}"));
    Path::new(dir)
        .join("crds/operators.coreos.com_clusterserviceversions.yaml")
        .to_string_lossy()
        .into_owned()
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn csv() -> Value {
    read_yaml(CSV_FILE)
}

/// The bundle's manifests (every file in bundle/manifests).
fn bundle_objects() -> Vec<(String, Value)> {
    let dir = Path::new(ROOT).join("bundle/manifests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("bundle/manifests")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("read");
            let docs = parse_documents(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(docs.len(), 1, "{}: one object per file", f.display());
            (
                f.file_name().expect("name").to_string_lossy().into_owned(),
                docs[0].clone(),
            )
        })
        .collect()
}

#[test]
fn opm_renders_the_bundle_and_validates_a_catalog_of_it() {
    let opm = opm();
    let (ok, version, _) = run(Command::new(&opm).arg("version"));
    assert!(ok && version.contains("v1.57.0"), "{version}");

    let (ok, rendered, stderr) = run(Command::new(&opm)
        .args(["render", "-o", "yaml"])
        .arg(Path::new(ROOT).join("bundle")));
    assert!(ok, "opm render bundle/: {stderr}");
    let docs = parse_documents(&rendered).expect("rendered YAML");
    assert_eq!(docs.len(), 1, "{rendered}");
    let bundle = &docs[0];
    assert_eq!(bundle["schema"], "olm.bundle");
    assert_eq!(bundle["package"], "mosc-guard");
    assert_eq!(
        bundle["name"],
        format!("mosc-guard.v{}", env!("CARGO_PKG_VERSION"))
    );
    let properties = bundle["properties"].as_array().expect("properties");
    let package = properties
        .iter()
        .find(|p| p["type"] == "olm.package")
        .expect("olm.package");
    assert_eq!(
        package["value"],
        json!({"packageName": "mosc-guard", "version": env!("CARGO_PKG_VERSION")})
    );
    let objects = properties
        .iter()
        .filter(|p| p["type"] == "olm.bundle.object")
        .count();
    assert_eq!(
        objects,
        bundle_objects().len(),
        "every manifest is a bundle object"
    );
    assert_eq!(
        bundle["relatedImages"],
        json!([{"name": "mosc-guard", "image": format!("quay.io/mosc-guard/mosc-guard:{}", env!("CARGO_PKG_VERSION"))}])
    );

    let catalog = |default_channel: &str| -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let package_dir = dir.path().join("mosc-guard");
        std::fs::create_dir(&package_dir).expect("mkdir");
        let head = format!(
            "---\nschema: olm.package\nname: mosc-guard\ndefaultChannel: {default_channel}\n\
             ---\nschema: olm.channel\npackage: mosc-guard\nname: {default_channel}\nentries:\n  - name: {}\n",
            bundle["name"].as_str().expect("name")
        );
        std::fs::write(
            package_dir.join("catalog.yaml"),
            format!("{head}{rendered}"),
        )
        .expect("write");
        dir
    };
    let good = catalog("alpha");
    let (ok, out, err) = run(Command::new(&opm).arg("validate").arg(good.path()));
    assert!(ok, "opm validate: {out}{err}");
    // The validation can fail: a channel whose entry is no bundle of the catalog.
    let bad = catalog("alpha");
    let file = bad.path().join("mosc-guard/catalog.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(
        &file,
        text.replacen("  - name: mosc-guard.v", "  - name: nosuch.v", 1),
    )
    .expect("write");
    let (ok, out, err) = run(Command::new(&opm).arg("validate").arg(bad.path()));
    assert!(
        !ok,
        "opm validate passed a channel naming no bundle: {out}{err}"
    );

    // The annotations the bundle image carries as labels are the metadata's.
    let annotations = read_yaml("bundle/metadata/annotations.yaml");
    let containerfile =
        std::fs::read_to_string(Path::new(ROOT).join("bundle/bundle.Containerfile")).expect("read");
    for (k, v) in annotations["annotations"].as_object().expect("annotations") {
        let label = format!("LABEL {k}={}", v.as_str().expect("value"));
        assert!(
            containerfile.contains(&label),
            "bundle.Containerfile lacks {label}"
        );
    }
    assert_eq!(
        annotations["annotations"]["operators.operatorframework.io.bundle.mediatype.v1"],
        "registry+v1"
    );
}

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

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    testkit::manifests::find(objects, kind, name).unwrap_or_else(|e| panic!("{e}"))
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

async fn kubectl(
    cp: &ControlPlane,
    args: &[&str],
    stdin: Option<&str>,
) -> testkit::kubectl::KubectlOutput {
    cp.kubectl_with_stdin(args, stdin)
        .await
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_passes_the_published_crd_on_a_real_api_server() {
    let cp = ControlPlane::start().await.expect("control plane");
    let crd = csv_crd();
    let out = kubectl(&cp, &["create", "-f", &crd], None).await;
    assert!(out.success(), "{out:?}");
    // `kubectl wait` errors out, not waits, while the new CRD has no conditions yet.
    testkit::scenario::wait_for(
        || async {
            let out = kubectl(
                &cp,
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd/clusterserviceversions.operators.coreos.com",
                ],
                None,
            )
            .await;
            Ok(out.success().then_some(()))
        },
        std::time::Duration::from_secs(60),
        "the ClusterServiceVersion CRD Established",
    )
    .await
    .expect("Established");
    let out = kubectl(&cp, &["create", "namespace", "mosc-guard"], None).await;
    assert!(out.success(), "{out:?}");

    for (file, _) in bundle_objects() {
        let path = Path::new(ROOT).join("bundle/manifests").join(&file);
        let path = path.to_string_lossy().into_owned();
        // The CRD's discovery may lag its Established condition by a moment.
        let out = testkit::scenario::wait_for(
            || async {
                let out = kubectl(
                    &cp,
                    &[
                        "apply",
                        "-n",
                        "mosc-guard",
                        "--dry-run=server",
                        "--validate=strict",
                        "-f",
                        &path,
                    ],
                    None,
                )
                .await;
                Ok((out.success()
                    || !out
                        .stderr
                        .contains("the server doesn't have a resource type")
                        && !out.stderr.contains("no matches for kind"))
                .then_some(out))
            },
            std::time::Duration::from_secs(30),
            "the CSV kind served",
        )
        .await
        .expect("served");
        assert!(out.success(), "{file}: server-side dry run: {out:?}");
        assert!(out.stdout.contains("(server dry run)"), "{out:?}");
        assert!(
            !out.stderr.to_ascii_lowercase().contains("warning"),
            "{file}: {}",
            out.stderr
        );
    }

    // The check can fail: a misspelt field and a wrong type are refused by the schema.
    let mut broken = csv();
    let hook = broken["spec"]["webhookdefinitions"][0]
        .as_object_mut()
        .expect("webhook");
    let path = hook.remove("webhookPath").expect("webhookPath");
    hook.insert("webhookPth".into(), path);
    let out = kubectl(
        &cp,
        &[
            "apply",
            "-n",
            "mosc-guard",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ],
        Some(&broken.to_string()),
    )
    .await;
    assert!(
        !out.success() && out.stderr.contains("webhookPth"),
        "a misspelt field must be refused: {out:?}"
    );
    let mut broken = csv();
    broken["spec"]["installModes"][3]["supported"] = json!("yes");
    let out = kubectl(
        &cp,
        &[
            "apply",
            "-n",
            "mosc-guard",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ],
        Some(&broken.to_string()),
    )
    .await;
    assert!(
        !out.success(),
        "a string for a boolean must be refused: {out:?}"
    );
}
