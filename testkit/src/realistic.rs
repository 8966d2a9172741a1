//! Nodes shaped like a real OpenShift cluster's, for the load tests and the cluster benchmark:
//! the guard's memory and the API server's cost depend on what nodes carry, not on the few
//! fields the policy reads.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

/// Node `i`'s name, unique up to 16.7 million nodes.
pub fn node_name(i: usize) -> String {
    format!("ip-{}.us-east-2.compute.internal", ip(i).replace('.', "-"))
}

fn ip(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
}

/// A node as OpenShift 4.20 on AWS with OVN-Kubernetes leaves it: 20 labels, 30 annotations
/// (MCO's, OVN's JSON ones, CSI, machine API), about 4 KiB of metadata, and a status as the
/// kubelet reports it (conditions, addresses, capacity, node info, 30 images).
pub fn node(i: usize, pool: &str, desired: &str, current: &str, state: &str) -> Node {
    let name = node_name(i);
    let ip = ip(i);
    let rendered = format!("rendered-{pool}-2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e");
    let zone = ["us-east-2a", "us-east-2b", "us-east-2c"][i % 3];
    let mac = format!(
        "02:42:0a:{:02x}:{:02x}:{:02x}",
        (i >> 16) & 0xff,
        (i >> 8) & 0xff,
        i & 0xff
    );
    let gateway = json!({"default": {
        "mode": "shared", "bridge-id": "br-ex", "interface-id": format!("br-ex_{name}"),
        "mac-address": mac, "ip-addresses": [format!("{ip}/19")], "ip-address": format!("{ip}/19"),
        "next-hops": ["10.0.0.1"], "next-hop": "10.0.0.1", "node-port-enable": "true",
        "vlan-id": "0"}})
    .to_string();
    let egress = json!([{"interface": format!("eni-0{i:016x}"),
        "ifaddr": {"ipv4": "10.0.0.0/19"}, "capacity": {"ipv4": 14, "ipv6": 15}}])
    .to_string();
    let pairs: Vec<(&str, String)> = vec![
        (
            "machineconfiguration.openshift.io/currentConfig",
            rendered.clone(),
        ),
        (
            "machineconfiguration.openshift.io/desiredConfig",
            rendered.clone(),
        ),
        (
            "machineconfiguration.openshift.io/desiredDrain",
            format!("uncordon-{rendered}"),
        ),
        (
            "machineconfiguration.openshift.io/lastAppliedDrain",
            format!("uncordon-{rendered}"),
        ),
        (
            "machineconfiguration.openshift.io/lastObservedServerCAAnnotation",
            "false".into(),
        ),
        (
            "machineconfiguration.openshift.io/lastSyncedControllerConfigResourceVersion",
            "48213".into(),
        ),
        ("machineconfiguration.openshift.io/reason", String::new()),
        ("machineconfiguration.openshift.io/state", state.into()),
        (
            "machineconfiguration.openshift.io/desiredImage",
            desired.into(),
        ),
        (
            "machineconfiguration.openshift.io/currentImage",
            current.into(),
        ),
        (
            "machineconfiguration.openshift.io/post-config-action",
            String::new(),
        ),
        (
            "machine.openshift.io/machine",
            format!("openshift-machine-api/ci-ln-x7k2-{pool}-{zone}-{i}"),
        ),
        (
            "csi.volume.kubernetes.io/nodeid",
            json!({"ebs.csi.aws.com": format!("i-0{i:016x}")}).to_string(),
        ),
        (
            "k8s.ovn.org/host-cidrs",
            json!([format!("{ip}/19")]).to_string(),
        ),
        ("k8s.ovn.org/l3-gateway-config", gateway),
        (
            "k8s.ovn.org/node-chassis-id",
            format!("{:08x}-51c4-4d3b-9a7e-{:012x}", i, i * 7919),
        ),
        ("k8s.ovn.org/node-encap-ips", json!([ip]).to_string()),
        (
            "k8s.ovn.org/node-gateway-router-lrp-ifaddrs",
            json!({"default": {"ipv4": format!("100.64.0.{}/16", i % 250 + 2)}}).to_string(),
        ),
        ("k8s.ovn.org/node-id", format!("{}", i + 2)),
        (
            "k8s.ovn.org/node-masquerade-subnet",
            json!({"ipv4": "169.254.0.0/17", "ipv6": "fd69::/112"}).to_string(),
        ),
        (
            "k8s.ovn.org/node-primary-ifaddr",
            json!({"ipv4": format!("{ip}/19")}).to_string(),
        ),
        (
            "k8s.ovn.org/node-subnets",
            json!({"default": [format!("10.{}.{}.0/23", 128 + i / 128, (i % 128) * 2)]})
                .to_string(),
        ),
        (
            "k8s.ovn.org/node-transit-switch-port-ifaddr",
            json!({"ipv4": format!("100.88.0.{}/16", i % 250 + 2)}).to_string(),
        ),
        ("k8s.ovn.org/remote-zone-migrated", name.clone()),
        ("k8s.ovn.org/zone-name", name.clone()),
        (
            "k8s.ovn.org/network-ids",
            json!({"default": "0"}).to_string(),
        ),
        (
            "k8s.ovn.org/udn-layer2-node-gateway-router-lrp-tunnel-ids",
            "{}".into(),
        ),
        ("cloud.network.openshift.io/egress-ipconfig", egress),
        ("node.alpha.kubernetes.io/ttl", "0".into()),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach",
            "true".into(),
        ),
    ];
    let annotations: serde_json::Map<String, Value> = pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "m6i.xlarge",
                "beta.kubernetes.io/os": "linux",
                "failure-domain.beta.kubernetes.io/region": "us-east-2",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": format!("ip-{}", ip.replace('.', "-")),
                "kubernetes.io/os": "linux",
                format!("node-role.kubernetes.io/{pool}"): "",
                "node.kubernetes.io/instance-type": "m6i.xlarge",
                "node.openshift.io/os_id": "rhel",
                "topology.ebs.csi.aws.com/zone": zone,
                "topology.k8s.aws/zone-id": format!("use2-az{}", i % 3 + 1),
                "topology.kubernetes.io/region": "us-east-2",
                "topology.kubernetes.io/zone": zone,
                "machine.openshift.io/interruptible-instance": "",
                "k8s.ovn.org/egress-assignable": "",
                "cluster.ocs.openshift.io/openshift-storage": "",
                "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true",
                "feature.node.kubernetes.io/kernel-version.full": "5.14.0-427.44.1.el9_4.x86_64",
            },
            "annotations": annotations,
        },
        "spec": {"providerID": format!("aws:///{zone}/i-0{i:016x}")},
        "status": status(i, &name, &ip),
    }))
    .expect("node fixture")
}

/// The kubelet's view of node `i`.
fn status(i: usize, name: &str, ip: &str) -> Value {
    let images: Vec<Value> = (0..30)
        .map(|k| {
            json!({
                "names": [
                    format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{:064x}", k * 7919 + 13),
                    format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev:4.20.{k}-component-{k}")
                ],
                "sizeBytes": 400_000_000 + k * 1_234_567
            })
        })
        .collect();
    json!({
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name},
            {"type": "InternalDNS", "address": name}
        ],
        "capacity": {"cpu": "4", "ephemeral-storage": "125293548Ki", "hugepages-1Gi": "0",
                     "hugepages-2Mi": "0", "memory": "16092956Ki", "pods": "250"},
        "allocatable": {"cpu": "3500m", "ephemeral-storage": "114396791822", "hugepages-1Gi": "0",
                        "hugepages-2Mi": "0", "memory": "14941980Ki", "pods": "250"},
        "conditions": conditions("2026-11-30T00:00:00Z"),
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": images,
        "nodeInfo": {
            "architecture": "amd64", "bootID": format!("{i:08x}-0000-4000-8000-000000000000"),
            "containerRuntimeVersion": "cri-o://1.33.5-3.rhaos4.20.gitd0ea985.el9",
            "kernelVersion": "5.14.0-570.49.1.el9_6.x86_64", "kubeProxyVersion": "",
            "kubeletVersion": "v1.33.5", "machineID": format!("ec2{i:029x}"),
            "operatingSystem": "linux",
            "osImage": "Red Hat Enterprise Linux CoreOS 9.6.20251023-0 (Plow)",
            "systemUUID": format!("ec2{i:05x}-0000-0000-0000-000000000000")
        }
    })
}

/// The node conditions a healthy kubelet reports, last heard from at `heartbeat` (RFC 3339).
pub fn conditions(heartbeat: &str) -> Value {
    let c = |t: &str, s: &str, reason: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": format!("kubelet {reason}"),
               "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-11-29T00:00:00Z"})
    };
    json!([
        c("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        c("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        c("PIDPressure", "False", "KubeletHasSufficientPID"),
        c("Ready", "True", "KubeletReady"),
    ])
}
