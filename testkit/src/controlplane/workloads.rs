//! What a control plane adds when a real node joins it ([`crate::node`]), so that a Deployment
//! runs as it does on a cluster: kube-apiserver reachable from pods (the node's address, the
//! `kubernetes` Service's endpoints written), Node authorization for the kubelet, the
//! ServiceAccount admission that mounts the pods' tokens; kube-controller-manager's workload
//! controllers; and kube-scheduler. Only the node tier pays for these: every other control plane
//! keeps its loopback-only API server and garbage-collector-only controller-manager.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use crate::Result;
use crate::net::free_port;
use crate::pki::CertPair;
use crate::process::ChildProcess;

/// kube-apiserver's flags for a real node at `node_ip`:
/// - it listens on every address and advertises `node_ip`, and its lease reconciler writes
///   that address as the `kubernetes` Service's endpoint: a pod's in-cluster configuration
///   (`KUBERNETES_SERVICE_HOST`, the ClusterIP 10.0.0.1) reaches it through kube-proxy;
/// - Node authorization and NodeRestriction for the kubelet's `system:node:` certificate;
/// - not the TaintNodesByCondition admission plugin: the `not-ready` taint it puts on every new
///   Node is lifted by the node lifecycle controller, which does not run here
///   ([`controller_manager_args`]); the kit waits for the kubelet's Ready condition instead;
/// - the ServiceAccount admission plugin (on by default) puts the projected token volume into
///   every pod; the kubelet asks the TokenRequest API for the tokens;
/// - `--kubelet-preferred-address-types=InternalIP` (logs, exec: the node name is not in DNS),
///   with `kubelet_client` to authenticate to the kubelet.
///
/// Webhook Services are reached through their ClusterIP as on a cluster (kube-proxy's rules also
/// apply to the host's own connections), not `--enable-aggregator-routing`: kube-proxy is needed
/// anyway for the pods to reach the API server.
pub(super) fn apiserver_args(node_ip: Ipv4Addr, kubelet_client: &CertPair) -> Vec<OsString> {
    vec![
        "--bind-address=0.0.0.0".into(),
        format!("--advertise-address={node_ip}").into(),
        "--endpoint-reconciler-type=lease".into(),
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        "--disable-admission-plugins=TaintNodesByCondition".into(),
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!(
            "--kubelet-client-certificate={}",
            kubelet_client.cert.display()
        )
        .into(),
        format!("--kubelet-client-key={}", kubelet_client.key.display()).into(),
    ]
}

/// The controllers a Deployment needs besides the garbage collector (pflag appends a repeated
/// `--controllers` to the first one): Deployments and ReplicaSets, the endpoint controllers
/// behind the Services, ServiceAccounts and the `kube-root-ca.crt` ConfigMap every pod's token
/// volume projects (with `--root-ca-file`), namespace deletion and the PodDisruptionBudget's
/// status (which evictions read). Not node lifecycle: it would mark the simulated workers,
/// which have no kubelet, Ready Unknown after its grace period, and MCO (so the simulator)
/// counts a node that is not Ready as unavailable, so rollouts would stop
/// ([`apiserver_args`] keeps the taint it would lift off the real node).
pub(super) fn controller_manager_args(ca: &Path) -> Vec<OsString> {
    vec![
        "--controllers=deployment,replicaset,endpoint,endpointslice,serviceaccount,\
         root-ca-cert-publisher,namespace,disruption"
            .into(),
        format!("--root-ca-file={}", ca.display()).into(),
    ]
}

/// Starts kube-scheduler as the admin on a free loopback port and waits until it serves.
pub(super) async fn start_scheduler(
    bin: &Path,
    dir: &Path,
    kubeconfig: &Path,
) -> Result<ChildProcess> {
    let cert_dir = dir.join("scheduler-certs");
    std::fs::create_dir_all(&cert_dir)?;
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!(
            "--authentication-kubeconfig={}",
            kubeconfig.display()
        ))
        .arg(format!(
            "--authorization-kubeconfig={}",
            kubeconfig.display()
        ))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg(format!("--cert-dir={}", cert_dir.display()))
        .arg("--v=2");
    let log = dir.join("kube-scheduler.log");
    let mut process = ChildProcess::spawn("kube-scheduler", cmd, &log)?;
    process
        .wait_log_line("serving", &["Serving securely on"])
        .await?;
    Ok(process)
}
