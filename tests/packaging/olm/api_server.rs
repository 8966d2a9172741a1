//! The ClusterServiceVersion and the rest of the bundle pass a strict server-side dry run
//! against the published ClusterServiceVersion CRD on a real API server; a broken CSV does not.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;

use super::{ROOT, bundle_objects, csv, run};

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

async fn kubectl(
    cp: &ControlPlane,
    args: &[&str],
    stdin: Option<&str>,
) -> testkit::kubectl::KubectlOutput {
    cp.kubectl_with_stdin(args, stdin)
        .await
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

/// `kubectl apply --dry-run=server --validate=strict` of `file` (`-`: `stdin`) in namespace
/// mosc-guard.
async fn server_dry_run(
    cp: &ControlPlane,
    file: &str,
    stdin: Option<&str>,
) -> testkit::kubectl::KubectlOutput {
    let args = [
        "apply",
        "-n",
        "mosc-guard",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        file,
    ];
    kubectl(cp, &args, stdin).await
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
                let out = server_dry_run(&cp, &path, None).await;
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
    let out = server_dry_run(&cp, "-", Some(&broken.to_string())).await;
    assert!(
        !out.success() && out.stderr.contains("webhookPth"),
        "a misspelt field must be refused: {out:?}"
    );
    let mut broken = csv();
    broken["spec"]["installModes"][3]["supported"] = json!("yes");
    let out = server_dry_run(&cp, "-", Some(&broken.to_string())).await;
    assert!(
        !out.success(),
        "a string for a boolean must be refused: {out:?}"
    );
}
