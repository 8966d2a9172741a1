//! opm renders the bundle directory and validates a one-bundle catalog of it (and refuses a
//! broken one); the bundle image's labels are the metadata's annotations.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use testkit::manifests::parse_documents;

use super::{ROOT, bundle_objects, read_yaml, run};

/// opm, built (once, cached) by hack/build-binaries.sh.
fn opm() -> PathBuf {
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("hack/build-binaries.sh"))
        .arg("opm")
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
