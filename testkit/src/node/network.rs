//! The node's network: its address (the kubelet refuses loopback), the pods' CNI network (a
//! Linux bridge with host-local addresses, from Debian's containernetworking-plugins; the
//! bridge plugin enforces no NetworkPolicy), and kube-proxy, which routes ClusterIPs: the
//! `kubernetes` Service for the pods' in-cluster configuration, and webhook Services for the
//! API server, whose own connections pass the same rules.

use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::layout::{BRIDGE, Layout, POD_CIDR};
use crate::Result;
use crate::net::free_port;
use crate::process::ChildProcess;

/// The address the machine reaches other hosts from (its default route's source address):
/// what the kubelet reports as the node's InternalIP and kube-apiserver advertises. No packet
/// is sent: connecting a UDP socket only picks the route.
pub fn node_ip() -> Result<Ipv4Addr> {
    let socket = UdpSocket::bind("0.0.0.0:0")?;
    // A TEST-NET-3 address: routed like any other host, never a local or broadcast address.
    socket
        .connect("203.0.113.1:9")
        .map_err(|e| format!("the machine has no route to pick a node address from: {e}"))?;
    match socket.local_addr()?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Ok(ip),
        other => Err(format!(
            "the machine's default route has source address {other}: the kubelet needs a \
             non-loopback IPv4 node address"
        )
        .into()),
    }
}

/// Writes the pods' CNI network: bridge [`BRIDGE`] as the pods' gateway, addresses from
/// [`POD_CIDR`] recorded under the node's state (no masquerading: pods only talk to the node
/// and to each other).
pub fn write_cni_config(layout: &Layout) -> Result<()> {
    let config = serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "mosc-guard-node",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_CIDR}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": layout.cni_ipam_dir(),
            },
        }],
    });
    let path = layout.cni_conf_dir().join("10-mosc-guard-node.conflist");
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

/// The ClusterIP of the `kubernetes` Service (the first address of the Service range).
const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// Starts kube-proxy (iptables mode) as the admin for node `node`, and waits until its rules
/// route the `kubernetes` Service's ClusterIP.
pub async fn start_kube_proxy(
    bin: &Path,
    layout: &Layout,
    node: &str,
    kubeconfig: &Path,
) -> Result<ChildProcess> {
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--hostname-override={node}"))
        .arg("--proxy-mode=iptables")
        .arg(format!("--cluster-cidr={POD_CIDR}"))
        // Leave the machine's conntrack table size alone.
        .arg("--conntrack-max-per-core=0")
        .arg(format!("--metrics-bind-address=127.0.0.1:{}", free_port()?))
        .arg(format!("--healthz-bind-address=127.0.0.1:{}", free_port()?))
        .arg("--v=2");
    let mut process = ChildProcess::spawn("kube-proxy", cmd, &layout.log("kube-proxy"))?
        .with_stop_grace(Duration::from_secs(5));
    process
        .wait_ready(
            "the kubernetes Service routed",
            Duration::from_secs(60),
            Duration::from_millis(200),
            || async {
                let mut iptables = Command::new("iptables");
                iptables.args(["-w", "-t", "nat", "-S", "KUBE-SERVICES"]);
                let out = crate::process::output(iptables).await?;
                let rules = String::from_utf8_lossy(&out.stdout);
                if rules.contains(&format!("{KUBERNETES_SERVICE_IP}/32")) {
                    Ok(())
                } else {
                    Err(format!("no rule for {KUBERNETES_SERVICE_IP} in KUBE-SERVICES yet").into())
                }
            },
        )
        .await?;
    Ok(process)
}
