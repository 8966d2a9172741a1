//! What a kubelet reports in the status of the Nodes the harness creates (it runs none): the
//! Ready condition and `status.nodeInfo` as RHCOS 9.6 on OpenShift 4.20 shows it, with a boot
//! ID (`/proc/sys/kernel/random/boot_id`) that changes only when the machine reboots: how a
//! reboot, or its absence, is seen through the API.

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Result;

/// A new boot ID (a UUID, as the kernel makes one per boot) for `node`.
pub fn new_boot_id(node: &str) -> String {
    static BOOTS: AtomicU64 = AtomicU64::new(0);
    let mut hash = Sha256::new();
    hash.update(node.as_bytes());
    hash.update(BOOTS.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    hash.update(nanos.to_le_bytes());
    let hex: String = hash
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The node's `status.nodeInfo.bootID`.
pub fn boot_id(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .node_info
        .as_ref()
        .map(|i| i.boot_id.as_str())
        .filter(|b| !b.is_empty())
}

/// A Ready node's status as the kubelet reports it, booted as `boot_id`.
pub fn status(node: &str, boot_id: &str) -> Value {
    let now = {
        let t = k8s_openapi::jiff::Timestamp::now();
        k8s_openapi::jiff::Timestamp::from_second(t.as_second()).unwrap_or(t)
    };
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": reason,
               "lastHeartbeatTime": now.to_string(), "lastTransitionTime": now.to_string()})
    };
    let machine_id: String = Sha256::digest(node.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("Ready", "True", "KubeletReady"),
        ],
        "nodeInfo": {
            "machineID": machine_id,
            "systemUUID": format!("ec2{}", &machine_id[3..]),
            "bootID": boot_id,
            "kernelVersion": "5.14.0-570.49.1.el9_6.x86_64",
            "osImage": "Red Hat Enterprise Linux CoreOS 9.6.20250925-0 (Plow)",
            "containerRuntimeVersion": "cri-o://1.33.5-2.rhaos4.20.gitb4ca4ee.el9",
            "kubeletVersion": "v1.33.5",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Writes what the kubelet of `node` reports when it starts after a boot: Ready, a new boot
/// ID (returned).
pub async fn report_boot(client: &kube::Client, node: &str) -> Result<String> {
    let boot_id = new_boot_id(node);
    crate::mco::nodes(client)
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status(node, &boot_id)})),
        )
        .await?;
    Ok(boot_id)
}
