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
//!
//! One test binary; the bundle's files and readers are here, the tests in modules by what they
//! hold the bundle against: [`opm`] (operator-registry), [`base_guard`] (manifests/base),
//! [`api_server`] (the published CRD on a real API server).

mod api_server;
mod base_guard;
mod opm;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use testkit::manifests::parse_documents;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CSV_FILE: &str = "bundle/manifests/mosc-guard.clusterserviceversion.yaml";

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

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    testkit::manifests::find(objects, kind, name).unwrap_or_else(|e| panic!("{e}"))
}
