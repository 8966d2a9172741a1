//! The node's kubelet (built from the same Kubernetes module as the API server): its
//! credentials (a `system:node:<name>` client certificate, which Node authorization and
//! NodeRestriction admit, and a serving certificate for logs and exec), its configuration, and
//! starting it until its Node is Ready.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::layout::Layout;
use crate::Result;
use crate::controlplane::ControlPlane;
use crate::net::free_port;
use crate::pki::CertPair;
use crate::process::ChildProcess;

/// How often the kubelet syncs each pod, which also bounds how late a changed Secret reaches
/// the pod's volume: 10 s here, so a rotation test waits seconds rather than the default 1 min.
const SYNC_FREQUENCY: &str = "10s";

/// The kubelet's configuration. What this machine needs: `failCgroupV1: false` (1.35 and
/// later refuse cgroup v1 otherwise) and the cgroupfs driver (no systemd here). Eviction and
/// image garbage collection thresholds are set so low they never fire on a shared test machine
/// (an eviction or a collected pause image would fail tests for reasons of their own).
fn config(layout: &Layout, node_ip: Ipv4Addr, ca: &Path, serving: &CertPair) -> Result<String> {
    Ok(format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{socket}
address: {node_ip}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
failSwapOn: false
resolvConf: /etc/resolv.conf
syncFrequency: {SYNC_FREQUENCY}
serializeImagePulls: false
maxPods: 30
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
",
        socket = layout.containerd_socket().display(),
        port = free_port()?,
        healthz = free_port()?,
        ca = ca.display(),
        cert = serving.cert.display(),
        key = serving.key.display(),
    ))
}

/// Writes the kubelet's certificates, kubeconfig and configuration, starts it as node `name`
/// at `node_ip`, and waits until its Node is Ready and untainted: schedulable.
pub async fn start(
    bin: &Path,
    layout: &Layout,
    cp: &ControlPlane,
    name: &str,
    node_ip: Ipv4Addr,
) -> Result<ChildProcess> {
    let pki = cp.pki();
    let kubeconfig = crate::users::kubeconfig_with_groups(
        cp,
        &format!("system:node:{name}"),
        &["system:nodes"],
        &layout.state,
        cp.server(),
    )?;
    let ip = node_ip.to_string();
    let serving = pki.server_cert("kubelet-serving", &[&ip, name])?;
    std::fs::write(
        layout.kubelet_config(),
        config(layout, node_ip, pki.ca_path(), &serving)?,
    )?;

    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config={}", layout.kubelet_config().display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--root-dir={}", layout.kubelet_root().display()))
        .arg(format!("--cert-dir={}", layout.pki_dir().display()))
        .arg(format!("--hostname-override={name}"))
        .arg(format!("--node-ip={node_ip}"))
        .arg("--v=2");
    let mut process = ChildProcess::spawn("kubelet", cmd, &layout.log("kubelet"))?
        .with_stop_grace(Duration::from_secs(10));
    let nodes: Api<Node> = Api::all(cp.client());
    process
        .wait_ready(
            "Node Ready and untainted",
            Duration::from_secs(60),
            Duration::from_millis(250),
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes.get(name).await?;
                    let taints: Vec<String> = node
                        .spec
                        .and_then(|s| s.taints)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|t| format!("{}:{}", t.key, t.effect))
                        .collect();
                    let ready = node
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|c| c.type_ == "Ready");
                    match ready {
                        Some(c) if c.status == "True" && taints.is_empty() => Ok(()),
                        other => Err(format!(
                            "Node {name}: Ready condition {other:?}, taints {taints:?}"
                        )
                        .into()),
                    }
                }
            },
        )
        .await?;
    Ok(process)
}
