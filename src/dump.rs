//! Reads a [`Snapshot`] from a directory: a must-gather, or files saved with
//! `oc get ... -o yaml` / `-o json`.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file below the directory is read, in path order
//! (symlinks are not followed). A file may hold several YAML documents or a stream of JSON
//! values; each is a single object or a list (`kind: List`, `NodeList`, ...). Nodes and the
//! v1 MCO kinds are kept; every other object is skipped silently. Whatever cannot be read
//! becomes a warning rather than an error, so one odd file in a must-gather does not hide
//! the rest of it: only an unreadable `dir` itself is an error.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use walkdir::WalkDir;

use crate::model::{GROUP, MachineConfigPool, MachineOSBuild, MachineOSConfig, NodeMeta, VERSION};
use crate::node::{Interner, WireMeta};
use crate::snapshot::Snapshot;

/// A snapshot read from a directory, with one line per thing that was skipped.
#[derive(Debug)]
pub struct Loaded {
    pub snapshot: Snapshot,
    /// `skipping <path relative to dir>: <reason>`, in path order.
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The directory itself is missing, not a directory, or unreadable.
    #[error("cannot read directory {}: {reason}", path.display())]
    ReadDir { path: PathBuf, reason: io::Error },
}

/// Reads every Kubernetes object of interest below `dir`.
pub fn load_dir(dir: &Path) -> Result<Loaded, DumpError> {
    // Reading the root up front gives the plain OS reason (missing, not a directory,
    // permission denied) instead of a walker error.
    std::fs::read_dir(dir).map_err(|reason| DumpError::ReadDir {
        path: dir.to_path_buf(),
        reason,
    })?;

    let mut warnings = Warnings::default();
    let mut files = Vec::new();
    for entry in WalkDir::new(dir).follow_links(false) {
        match entry {
            Ok(entry) if entry.file_type().is_file() && wanted(entry.path()) => {
                files.push(entry.into_path());
            }
            Ok(_) => {}
            Err(err) => {
                let path = err.path().unwrap_or(dir).to_path_buf();
                let reason = err
                    .io_error()
                    .map_or_else(|| err.to_string(), ToString::to_string);
                if path == dir {
                    return Err(DumpError::ReadDir {
                        path,
                        reason: err
                            .into_io_error()
                            .unwrap_or_else(|| io::Error::other(reason)),
                    });
                }
                warnings.push(&path, rel(dir, &path), reason);
            }
        }
    }
    files.sort();

    let mut objects = Objects::default();
    for path in &files {
        let rel = rel(dir, path);
        load_file(path, &rel, &mut objects, &mut warnings);
    }
    tracing::debug!(
        dir = %dir.display(),
        files = files.len(),
        warnings = warnings.0.len(),
        "read snapshot from directory"
    );
    Ok(Loaded {
        snapshot: objects.into_snapshot(),
        warnings: warnings.into_sorted(),
    })
}

/// Warnings tagged with the path they are about, so they come out in path order.
#[derive(Default)]
struct Warnings(Vec<(PathBuf, String)>);

impl Warnings {
    fn push(&mut self, path: &Path, rel: impl fmt::Display, reason: impl fmt::Display) {
        self.0
            .push((path.to_path_buf(), format!("skipping {rel}: {reason}")));
    }

    fn into_sorted(mut self) -> Vec<String> {
        // Stable: warnings about one file keep the order they were found in.
        self.0.sort_by(|a, b| a.0.cmp(&b.0));
        self.0.into_iter().map(|(_, w)| w).collect()
    }
}

fn wanted(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["yaml", "yml", "json"]
            .iter()
            .any(|w| e.eq_ignore_ascii_case(w))
    })
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// `path` relative to `dir`, for messages.
fn rel(dir: &Path, path: &Path) -> String {
    let shown = path.strip_prefix(dir).unwrap_or(path);
    if shown.as_os_str().is_empty() {
        path.display().to_string()
    } else {
        shown.display().to_string()
    }
}

fn load_file(path: &Path, rel: &str, objects: &mut Objects, warnings: &mut Warnings) {
    let documents = match read_documents(path) {
        Ok(documents) => documents,
        Err(reason) => {
            warnings.push(path, rel, reason);
            return;
        }
    };
    let several = documents.len() > 1;
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        // An empty document (`---` at the end of a file, an empty file) holds nothing.
        if document.is_null() {
            continue;
        }
        if let Err(problem) = flatten(document, None, &mut found) {
            problems.push(if several {
                format!("document {}: {problem}", i + 1)
            } else {
                problem
            });
        }
    }
    // One warning per file for its shape, however many documents or items are off.
    if let Some(first) = problems.first() {
        let more = match problems.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        warnings.push(path, rel, format!("{first}{more}"));
    }
    for object in found {
        if let Err(reason) = objects.add(object) {
            warnings.push(path, rel, reason);
        }
    }
}

/// Every YAML document or JSON value in the file; an error if any of it does not parse.
fn read_documents(path: &Path) -> Result<Vec<Value>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| format!("not UTF-8 text: {e}"))?;
    if is_json(path) {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("not valid JSON: {e}"))
    } else {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(Value::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("not valid YAML: {e}"))
    }
}

/// A Kubernetes object: its `apiVersion`, `kind` and the whole object.
struct Typed {
    api_version: String,
    kind: String,
    object: Map<String, Value>,
}

/// Type a list's items inherit when they lack their own (`NodeList` items are Nodes).
struct ItemType<'a> {
    api_version: &'a str,
    kind: &'a str,
}

/// Pushes the object(s) `value` holds onto `out`: itself, or the items of a list.
/// Items that are not objects are dropped and reported as one problem.
fn flatten(
    value: Value,
    inherit: Option<&ItemType<'_>>,
    out: &mut Vec<Typed>,
) -> Result<(), String> {
    let mut object = match value {
        Value::Object(object) => object,
        other => {
            return Err(format!(
                "not a Kubernetes object (found {})",
                describe(&other)
            ));
        }
    };
    let field = |object: &Map<String, Value>, key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let api_version =
        field(&object, "apiVersion").or_else(|| inherit.map(|t| t.api_version.to_string()));
    let kind = field(&object, "kind").or_else(|| inherit.map(|t| t.kind.to_string()));
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return Err("not a Kubernetes object (no apiVersion/kind)".to_string());
    };
    let is_list = kind.ends_with("List")
        && matches!(object.get("items"), Some(Value::Array(_) | Value::Null));
    if !is_list {
        out.push(Typed {
            api_version,
            kind,
            object,
        });
        return Ok(());
    }
    let items = match object.remove("items") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // `kind: List` says nothing about its items; `NodeList` says they are `v1` Nodes.
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let inherit = item_kind.map(|kind| ItemType {
        api_version: &api_version,
        kind,
    });
    let mut first_problem = None;
    let mut problems = 0;
    for (i, item) in items.into_iter().enumerate() {
        if let Err(problem) = flatten(item, inherit.as_ref(), out) {
            problems += 1;
            first_problem.get_or_insert_with(|| format!("{kind} item {}: {problem}", i + 1));
        }
    }
    match (first_problem, problems) {
        (None, _) => Ok(()),
        (Some(first), 1) => Err(first),
        (Some(first), n) => Err(format!("{first} (and {} more items)", n - 1)),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// The objects kept so far, one per (kind, name).
#[derive(Default)]
struct Objects {
    machine_os_configs: Kept<MachineOSConfig>,
    machine_os_builds: Kept<MachineOSBuild>,
    pools: Kept<MachineConfigPool>,
    nodes: Kept<NodeMeta>,
    interner: Interner,
}

impl Objects {
    /// Keeps `typed` if it is one of ours; an error names an object of ours that could
    /// not be decoded.
    fn add(&mut self, typed: Typed) -> Result<(), String> {
        let Typed {
            api_version,
            kind,
            object,
        } = typed;
        let mco_v1 = api_version == format!("{GROUP}/{VERSION}");
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "Node") => self.nodes.add(&kind, node(object, &mut self.interner)?),
            (_, "MachineOSConfig") if mco_v1 => {
                self.machine_os_configs.add(&kind, mco(&kind, object)?)
            }
            (_, "MachineOSBuild") if mco_v1 => {
                self.machine_os_builds.add(&kind, mco(&kind, object)?)
            }
            (_, "MachineConfigPool") if mco_v1 => self.pools.add(&kind, mco(&kind, object)?),
            (_, "MachineOSConfig" | "MachineOSBuild" | "MachineConfigPool")
                if api_version.starts_with(&format!("{GROUP}/")) =>
            {
                // An older API (4.16-4.18 tech preview v1alpha1) with a different schema:
                // decoding it as v1 would guess wrong, and silently missing it would make
                // `check` answer "not found".
                Err(format!(
                    "{api_version} {kind} {} is not supported (only {GROUP}/{VERSION})",
                    name_in(&object)
                ))
            }
            _ => Ok(()),
        }
    }

    fn into_snapshot(self) -> Snapshot {
        Snapshot {
            machine_os_configs: self.machine_os_configs.into_vec(),
            machine_os_builds: self.machine_os_builds.into_vec(),
            pools: self.pools.into_vec(),
            nodes: self.nodes.into_vec(),
        }
    }
}

/// A decoded object ready to keep.
struct Decoded<T> {
    name: String,
    resource_version: Option<u64>,
    object: T,
}

/// Objects of one kind by name. Of two copies the one with the larger numeric
/// resourceVersion wins, otherwise the one read later (files are read in path order).
struct Kept<T>(BTreeMap<String, (Option<u64>, Arc<T>)>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(BTreeMap::new())
    }
}

impl<T> Kept<T> {
    fn add(&mut self, kind: &str, decoded: Decoded<T>) -> Result<(), String> {
        if decoded.name.is_empty() {
            return Err(format!("{kind} without metadata.name"));
        }
        let older = |kept: &Option<u64>| match (kept, decoded.resource_version) {
            (Some(kept), Some(new)) => *kept > new,
            _ => false,
        };
        if self.0.get(&decoded.name).is_some_and(|(rv, _)| older(rv)) {
            return Ok(());
        }
        self.0.insert(
            decoded.name,
            (decoded.resource_version, Arc::new(decoded.object)),
        );
        Ok(())
    }

    /// Sorted by name.
    fn into_vec(self) -> Vec<Arc<T>> {
        self.0.into_values().map(|(_, object)| object).collect()
    }
}

fn name_in(object: &Map<String, Value>) -> String {
    match object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
    {
        Some(name) => format!("{name:?}"),
        None => "<unnamed>".to_string(),
    }
}

fn decoded<T>(object: T, meta: impl Fn(&T) -> &ObjectMeta) -> Decoded<T> {
    let meta = meta(&object);
    let name = meta.name.clone().unwrap_or_default();
    let resource_version = meta
        .resource_version
        .as_deref()
        .and_then(|rv| rv.trim().parse().ok());
    Decoded {
        name,
        resource_version,
        object,
    }
}

/// A Node reduced to what the policy reads (see [`crate::node`]), its strings shared with the
/// other nodes of the dump through `interner`.
fn node(
    mut object: Map<String, Value>,
    interner: &mut Interner,
) -> Result<Decoded<NodeMeta>, String> {
    let name = name_in(&object);
    let meta: WireMeta = serde_json::from_value(object.remove("metadata").unwrap_or(Value::Null))
        .map_err(|e| format!("Node {name}: cannot decode metadata: {e}"))?;
    let resource_version = meta.revision();
    let node = NodeMeta::from_wire(meta, interner, |_| true);
    Ok(Decoded {
        name: node.name().to_string(),
        resource_version,
        object: node,
    })
}

/// One of the MCO kinds, decoded into our model (without managedFields).
fn mco<T>(kind: &str, mut object: Map<String, Value>) -> Result<Decoded<T>, String>
where
    T: DeserializeOwned + kube::core::Resource,
{
    let name = name_in(&object);
    // managedFields can dwarf the rest of the object; nothing reads it.
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.remove("managedFields");
    }
    let decoded_object: T = serde_json::from_value(Value::Object(object))
        .map_err(|e| format!("{kind} {name}: cannot decode: {e}"))?;
    Ok(decoded(decoded_object, T::meta))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::model::node_annotations;

    const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930";

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, content) in files {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().expect("file has a parent")).expect("mkdir");
            fs::write(path, content).expect("write fixture");
        }
        dir
    }

    fn load(files: &[(&str, &str)]) -> Loaded {
        let dir = tree(files);
        load_dir(dir.path()).expect("directory loads")
    }

    fn names<T: kube::core::Resource>(objects: &[Arc<T>]) -> Vec<String> {
        objects
            .iter()
            .map(|o| o.meta().name.clone().unwrap_or_default())
            .collect()
    }

    fn node_names(nodes: &[Arc<NodeMeta>]) -> Vec<String> {
        nodes.iter().map(|n| n.name().to_string()).collect()
    }

    const MOSC: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"100\"
spec:
  machineConfigPool:
    name: worker
  renderedImagePushSpec: image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest
";

    #[test]
    fn multi_document_yaml() {
        let text = format!(
            "---\n{MOSC}---\napiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: worker-8f2a1c
  labels:
    machineconfiguration.openshift.io/machine-os-config: worker
status:
  digestedImagePushSpec: {IMAGE}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: other
  namespace: default
---
"
        );
        let loaded = load(&[("all.yaml", &text)]);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        let snap = &loaded.snapshot;
        assert_eq!(names(&snap.machine_os_configs), ["worker"]);
        assert_eq!(names(&snap.machine_os_builds), ["worker-8f2a1c"]);
        let mosb = snap.machine_os_build("worker-8f2a1c").expect("mosb kept");
        assert_eq!(mosb.status.digested_image_push_spec.as_deref(), Some(IMAGE));
        assert!(mosb.belongs_to("worker"));
    }

    #[test]
    fn list_with_item_kinds() {
        let text = format!(
            "apiVersion: v1
kind: List
metadata:
  resourceVersion: \"\"
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfigPool
  metadata:
    name: worker
  spec:
    nodeSelector:
      matchLabels:
        node-role.kubernetes.io/worker: \"\"
- apiVersion: v1
  kind: Node
  metadata:
    name: worker-a
    managedFields:
    - manager: kubelet
      operation: Update
    annotations:
      {}: {IMAGE}
  spec:
    providerID: aws:///us-east-2a/i-0123
  status:
    nodeInfo:
      kubeletVersion: v1.33.5
",
            node_annotations::DESIRED_IMAGE
        );
        let loaded = load(&[("list.yml", &text)]);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        let snap = &loaded.snapshot;
        assert_eq!(names(&snap.pools), ["worker"]);
        assert!(snap.pools[0].spec.node_selector.is_some());
        assert_eq!(node_names(&snap.nodes), ["worker-a"]);
        let node = &snap.nodes[0];
        assert_eq!(node.desired_image(), Some(IMAGE));
        assert_eq!(node.labels().count(), 0, "the fixture's node has no labels");
    }

    #[test]
    fn typed_list_items_inherit_kind_and_json_lists() {
        let nodes = r#"{
  "apiVersion": "v1",
  "kind": "NodeList",
  "metadata": {"resourceVersion": "123"},
  "items": [
    {"metadata": {"name": "worker-b", "labels": {"node-role.kubernetes.io/worker": ""}}},
    {"metadata": {"name": "worker-a"}}
  ]
}"#;
        let moscs = format!(
            r#"{{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfigList",
                "items": [{{"metadata": {{"name": "worker"}}, "spec": {{"machineConfigPool": {{"name": "worker"}}}},
                            "status": {{"currentImagePullSpec": "{IMAGE}"}}}}]}}"#
        );
        let empty = r#"{"apiVersion": "v1", "kind": "List", "items": []}"#;
        let loaded = load(&[
            ("nodes.json", nodes),
            ("moscs.JSON", &moscs),
            ("empty.json", empty),
        ]);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        let snap = &loaded.snapshot;
        assert_eq!(
            node_names(&snap.nodes),
            ["worker-a", "worker-b"],
            "sorted by name"
        );
        let mosc = snap
            .machine_os_config("worker")
            .expect("mosc from typed list");
        assert_eq!(mosc.status.current_image_pull_spec.as_deref(), Some(IMAGE));
    }

    #[test]
    fn untyped_items_of_a_plain_list_are_one_warning() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"metadata": {"name": "a"}},
            "junk",
            null,
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
        ]}"#;
        let loaded = load(&[("list.json", text)]);
        assert_eq!(
            node_names(&loaded.snapshot.nodes),
            ["n"],
            "good items still read"
        );
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert_eq!(
            loaded.warnings[0],
            "skipping list.json: List item 1: not a Kubernetes object (no apiVersion/kind) (and 2 more items)"
        );
    }

    #[test]
    fn noise_files_are_one_warning_each() {
        let loaded = load(&[
            ("timestamp", "2025-11-30 02:19:00 +0000 UTC\n"),
            ("event-filter.html", "<html><body>events</body></html>"),
            ("a/not-yaml.yaml", "key: [unclosed\n  - : :\n"),
            ("a/strings.json", r#"["one", "two"]"#),
            ("a/prose.yaml", "just some words\n"),
            ("a/half.yaml", "{}\n---\nfoo: bar\n"),
            (
                "a/pod.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\nspec:\n  containers: []\n",
            ),
            ("a/binary.json", "\u{0}\u{1}{"),
            ("a/empty.yaml", ""),
            ("a/only-separators.yml", "---\n---\n"),
            ("b/mosc.yaml", MOSC),
        ]);
        assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
        let w = &loaded.warnings;
        assert_eq!(w.len(), 5, "{w:#?}");
        assert!(
            w[0].starts_with("skipping a/binary.json: not valid JSON"),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with("skipping a/half.yaml: document 1: not a Kubernetes object (no apiVersion/kind) (and 1 more)"),
            "{}",
            w[1]
        );
        assert!(
            w[2].starts_with("skipping a/not-yaml.yaml: not valid YAML"),
            "{}",
            w[2]
        );
        assert_eq!(
            w[3],
            "skipping a/prose.yaml: not a Kubernetes object (found a string)"
        );
        assert_eq!(
            w[4],
            "skipping a/strings.json: not a Kubernetes object (found a sequence)"
        );
    }

    #[test]
    fn undecodable_object_is_one_warning_and_skipped() {
        let bad = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: infra
spec:
  machineConfigPool: infra
";
        let nameless = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {}
";
        let alpha = "apiVersion: machineconfiguration.openshift.io/v1alpha1
kind: MachineOSConfig
metadata:
  name: old
spec:
  machineConfigPool:
    name: old
";
        let loaded = load(&[
            ("bad.yaml", bad),
            ("good.yaml", MOSC),
            ("nameless.yaml", nameless),
            ("v1alpha1.yaml", alpha),
        ]);
        assert_eq!(names(&loaded.snapshot.machine_os_configs), ["worker"]);
        assert!(loaded.snapshot.pools.is_empty());
        let w = &loaded.warnings;
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(
            w[0].starts_with("skipping bad.yaml: MachineOSConfig \"infra\": cannot decode:"),
            "{}",
            w[0]
        );
        assert_eq!(
            w[1],
            "skipping nameless.yaml: MachineConfigPool without metadata.name"
        );
        assert!(
            w[2].contains("v1alpha1 MachineOSConfig \"old\" is not supported"),
            "{}",
            w[2]
        );
    }

    fn mosc_with(rv: &str, pool: &str) -> String {
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"{rv}\"
spec:
  machineConfigPool:
    name: {pool}
"
        )
    }

    fn pool_of_worker(loaded: &Loaded) -> String {
        assert_eq!(loaded.snapshot.machine_os_configs.len(), 1, "deduplicated");
        let mosc = &loaded.snapshot.machine_os_configs[0];
        mosc.spec
            .machine_config_pool
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_default()
    }

    #[test]
    fn duplicates_keep_the_newest_resource_version() {
        // Numerically newer wins even though it is read first ("900" < "1000" as text).
        let loaded = load(&[
            ("a/single.yaml", &mosc_with("1000", "newer")),
            (
                "b/list.yaml",
                &format!(
                    "apiVersion: v1\nkind: List\nitems:\n- {}",
                    mosc_with("900", "older").replace('\n', "\n  ")
                ),
            ),
        ]);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        assert_eq!(pool_of_worker(&loaded), "newer");

        let loaded = load(&[
            ("a.yaml", &mosc_with("7", "older")),
            ("b.yaml", &mosc_with("8", "newer")),
        ]);
        assert_eq!(pool_of_worker(&loaded), "newer");
    }

    #[test]
    fn duplicates_without_comparable_versions_keep_the_later_path() {
        let loaded = load(&[
            ("b.yaml", &mosc_with("", "later")),
            ("a.yaml", &mosc_with("5", "earlier")),
        ]);
        assert_eq!(pool_of_worker(&loaded), "later");
        let loaded = load(&[
            ("a/x.yaml", &mosc_with("5", "earlier")),
            ("a/y.yaml", &mosc_with("5", "later")),
        ]);
        assert_eq!(pool_of_worker(&loaded), "later");
    }

    #[test]
    fn empty_directory_is_an_empty_snapshot() {
        let dir = tempfile::tempdir().expect("temp dir");
        let loaded = load_dir(dir.path()).expect("empty dir loads");
        assert!(loaded.warnings.is_empty());
        let snap = loaded.snapshot;
        assert!(snap.machine_os_configs.is_empty() && snap.nodes.is_empty());
    }

    #[test]
    fn missing_directory_is_an_error_with_path_and_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("nope");
        let err = load_dir(&missing).expect_err("missing dir");
        let DumpError::ReadDir { path, reason } = &err;
        assert_eq!(path, &missing);
        assert_eq!(reason.kind(), io::ErrorKind::NotFound);
        let text = err.to_string();
        assert!(
            text.contains("nope") && text.contains("No such file"),
            "{text}"
        );

        let file = dir.path().join("file.yaml");
        fs::write(&file, MOSC).expect("write");
        assert!(load_dir(&file).is_err(), "a file is not a directory");
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_not_followed() {
        let outside = tree(&[("mosc.yaml", MOSC)]);
        let dir = tree(&[]);
        std::os::unix::fs::symlink(
            outside.path().join("mosc.yaml"),
            dir.path().join("link.yaml"),
        )
        .expect("symlink");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).expect("symlink");
        let loaded = load_dir(dir.path()).expect("loads");
        assert!(loaded.snapshot.machine_os_configs.is_empty());
        assert!(loaded.warnings.is_empty());
    }
}
