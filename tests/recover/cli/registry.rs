//! `recover --from-dir --authfile`: a plan from a must-gather asks the registry as `images
//! --from-dir` does (the dump's ControllerConfig for the CAs, the mirror sets, the credentials
//! from the auth file), here a real registry behind TLS and token auth whose image the stuck
//! node waits for: served (never cancelled, exit 1), refused credentials (unknown: a dump's plan
//! says the loss was not verified), deleted behind everyone's back (missing: recoverable). A
//! dump without `--authfile`, or without a ControllerConfig, is not asked, and says so.

use std::fs;
use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};
use testkit::node_registry::{NODE_PASSWORD, NODE_USER, SecureFace};
use testkit::registry::Registry;

use super::dumps::copy_tree;
use super::*;

fn b64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A copy of the fixture whose stuck node waits for `image`, with a ControllerConfig holding
/// `face`'s CA for its host (`..` for `:`), as a must-gather holds it.
fn dump_on(dir: &Path, image: &str, face: &SecureFace) {
    copy_tree(&fixture(), dir);
    let gather = fs::read_dir(dir)
        .expect("read copy")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("the must-gather's image directory");
    let node = gather.join(format!("cluster-scoped-resources/core/nodes/{STUCK}.yaml"));
    let text = fs::read_to_string(&node).expect("read node");
    assert!(text.contains(LOST_IMAGE), "the fixture's node waits for it");
    fs::write(&node, text.replace(LOST_IMAGE, image)).expect("write node");
    let controller = json!({"apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig", "metadata": {"name": "machine-config-controller"},
        "spec": {"imageRegistryBundleUserData": [
            {"file": face.host().replace(':', ".."), "data": b64(&face.pki.ca_pem())}]}});
    let configs =
        gather.join("cluster-scoped-resources/machineconfiguration.openshift.io/controllerconfigs");
    fs::create_dir_all(&configs).expect("mkdir");
    fs::write(
        configs.join("machine-config-controller.yaml"),
        serde_yaml_ng::to_string(&controller).expect("yaml"),
    )
    .expect("write ControllerConfig");
}

/// An auth file for `face`'s host with `password`.
fn authfile(path: &Path, face: &SecureFace, password: &str) {
    let auth = json!({"auths": {face.host(): {"auth": b64(&format!("{NODE_USER}:{password}"))}}});
    fs::write(path, auth.to_string()).expect("write auth file");
}

fn registry_of<'r>(report: &'r Value, key: &str) -> &'r Value {
    &report[key][0]["registry"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_with_an_authfile_asks_the_registry_as_the_node_pulls() {
    let open = Registry::start().await.expect("registry");
    let face = SecureFace::over(&open).await.expect("secure registry");
    let digest = open
        .push_image("ocb/os-image", "worker-1")
        .await
        .expect("push");
    let image = format!("{}/ocb/os-image@{digest}", face.host());
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("must-gather");
    dump_on(&dir, &image, &face);
    let (good, wrong) = (tmp.path().join("auth.json"), tmp.path().join("wrong.json"));
    authfile(&good, &face, NODE_PASSWORD);
    let wrong_password = "WRONG-secret-1c2d3e";
    authfile(&wrong, &face, wrong_password);
    fn with(file: &Path) -> [&str; 4] {
        ["--authfile", file.to_str().expect("UTF-8"), "-o", "json"]
    }
    let mut runs = Vec::new();

    // Served: the daemon's retry can still succeed; never cancelled.
    let served = recover_dir(&dir, &with(&good));
    assert_eq!(served.code, Some(1), "{served:?}");
    let report = served.json();
    assert_eq!(report["recoverable"], json!([]), "{report:#}");
    assert_eq!(
        report["needsAttention"][0]["problems"],
        json!(["imageStillServed"])
    );
    assert_eq!(
        registry_of(&report, "needsAttention")["status"],
        "available"
    );
    runs.push(served);

    // Refused credentials: unknown; a dump's plan goes on and says the loss was not verified
    // (recover --apply asks the live registry again).
    let refused = recover_dir(&dir, &with(&wrong));
    assert_eq!(refused.code, Some(0), "{refused:?}");
    let report = refused.json();
    assert_eq!(nodes_in(&report, "recoverable"), [STUCK]);
    assert_eq!(registry_of(&report, "recoverable")["status"], "unknown");
    let why = report["recoverable"][0]["why"].to_string();
    assert!(
        why.contains("the loss was not verified by the registry (the registry could not tell")
            && why.contains("recover --apply asks the registry again"),
        "{report:#}"
    );
    runs.push(refused);

    // Deleted behind everyone's back, as a retention policy would: missing, the loss verified.
    assert!(
        open.delete_manifest("ocb/os-image", &digest)
            .await
            .expect("delete")
    );
    let gone = recover_dir(&dir, &with(&good));
    assert_eq!(gone.code, Some(0), "{gone:?}");
    let report = gone.json();
    assert_eq!(nodes_in(&report, "recoverable"), [STUCK]);
    let registry = registry_of(&report, "recoverable");
    assert_eq!(registry["status"], "missing", "{report:#}");
    assert!(
        registry["why"]
            .as_str()
            .is_some_and(|w| w.contains("MANIFEST_UNKNOWN")),
        "{report:#}"
    );
    assert_eq!(report["warnings"], json!([]), "{report:#}");
    let text = recover_dir(&dir, &["--authfile", good.to_str().expect("UTF-8")]);
    assert!(
        text.stdout
            .contains("its registry, asked as the node pulls it, says the image is gone"),
        "{text:?}"
    );
    runs.extend([gone, text]);

    // Without --authfile: not asked, and said so.
    let unasked = recover_dir(&dir, &["-o", "json"]);
    assert_eq!(unasked.code, Some(0), "{unasked:?}");
    let report = unasked.json();
    assert_eq!(registry_of(&report, "recoverable")["status"], Value::Null);
    assert!(
        report["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("without --authfile")),
        "{report:#}"
    );

    // A dump without the ControllerConfig: the node's CAs are not known, so not asked either.
    fs::remove_dir_all(
        fs::read_dir(&dir)
            .expect("read copy")
            .map(|e| e.expect("entry").path())
            .find(|p| p.is_dir())
            .expect("image directory")
            .join("cluster-scoped-resources/machineconfiguration.openshift.io/controllerconfigs"),
    )
    .expect("rm");
    let bare = recover_dir(&dir, &with(&good));
    assert_eq!(bare.code, Some(0), "{bare:?}");
    assert!(
        bare.json()["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("holds no ControllerConfig")),
        "{bare:?}"
    );

    // An auth file that cannot be read is bad input: exit 2.
    let broken = tmp.path().join("broken.json");
    fs::write(&broken, "{not json").expect("write");
    let unreadable = recover_dir(&dir, &with(&broken));
    assert_eq!(unreadable.code, Some(2), "{unreadable:?}");
    assert_eq!(unreadable.stdout, "");
    let apply = recover_dir(&dir, &["--apply", "--image-loss-verified"]);
    assert_eq!(apply.code, Some(2), "{apply:?}");

    for r in &runs {
        for secret in [NODE_PASSWORD, wrong_password] {
            assert!(
                !r.stdout.contains(secret) && !r.stderr.contains(secret),
                "{r:?}"
            );
        }
    }
}
