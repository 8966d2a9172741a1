//! Reading dumps: the fixtures here, the tests by topic in the files below.

mod copies;
mod gaps;
mod recovery;
mod shapes;

use std::fs;
use std::sync::Arc;

use super::*;
use crate::core::model::node_annotations;
use crate::core::node::NodeMeta;

pub(super) const IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image@sha256:01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930";

pub(super) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("file has a parent")).expect("mkdir");
        fs::write(path, content).expect("write fixture");
    }
    dir
}

pub(super) fn load(files: &[(&str, &str)]) -> Loaded {
    let dir = tree(files);
    load_dir(dir.path()).expect("directory loads")
}

pub(super) fn names<T: kube::core::Resource>(objects: &[Arc<T>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

pub(super) fn node_names(nodes: &[Arc<NodeMeta>]) -> Vec<String> {
    nodes.iter().map(|n| n.name().to_string()).collect()
}

pub(super) const MOSC: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
  resourceVersion: \"100\"
spec:
  machineConfigPool:
    name: worker
  renderedImagePushSpec: image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest
";

pub(super) const POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: \"\"
";

pub(super) const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: worker-a
  labels:
    node-role.kubernetes.io/worker: \"\"
";

/// A must-gather's path for a node.
pub(super) const NODE_PATH: &str = "mg/cluster-scoped-resources/core/nodes/worker-a.yaml";
