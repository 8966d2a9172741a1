//! `overlays/cert-manager` (deny mode) on a real node: the pods run as the manifests say, the
//! report's scenario is refused and then allowed through the Service, and an admin's first
//! hour (a replica evicted within the PodDisruptionBudget, one deleted, the Deployment rolled,
//! the certificate rotated) costs no request.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::EvictParams;

use testkit::node::PodMemory;
use testkit::poll::wait_for;
use testkit::scenario::*;

use super::deploy::{Deployed, Overlay, deploy};
use super::traffic::{self, der_of, served_certificate};
use super::{BIN, NAME, NAMESPACE, ROLLOUT_TIMEOUT};

/// The manifests' memory limit (deployment.yaml, `resources.limits.memory`).
const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, the image and the machine's node: `make node-test` runs it"]
async fn cert_manager_overlay_runs_as_shipped_and_guards_through_its_service() {
    let mut d = deploy(Overlay::CertManager).await;
    let pods = d.pods().await;
    assert_eq!(pods.len(), 2, "two replicas\n{}", d.explain().await);
    for pod in &pods {
        assert_runs_as_shipped(&d, pod);
    }
    let mut peak = MemoryPeak::default();
    peak.sample(&d).await;

    // The report's scenario, through the Service: refused mid-rollout.
    create_infra_mosc(d.cluster()).await;
    wait_for_build(&d.cluster().client, "infra", STEP_TIMEOUT)
        .await
        .expect("MOSC infra built");
    let rollout = d
        .cluster()
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout");
    let out = d.kubectl(&["delete", "machineosconfig", "worker"]).await;
    if let Err(e) = refused_mid_rollout(&out, &rollout) {
        panic!("{e}\n{}", d.explain().await);
    }
    let logs = d
        .kubectl_ok(&[
            "logs",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=mosc-guard",
            "--tail=-1",
        ])
        .await
        .stdout;
    assert!(
        logs.contains("\"result\":\"denied\""),
        "a pod logged the refusal: {logs}"
    );
    assert!(
        !logs.contains("forbidden"),
        "the ServiceAccount's RBAC suffices: {logs}"
    );
    peak.sample(&d).await;

    // An admin's first hour, the node still mid-update: a replica evicted as a drain evicts
    // it (within the PodDisruptionBudget), a replica deleted, then the Deployment rolled,
    // while a client keeps asking.
    let client = traffic::start(d.cluster().client.clone(), "worker", "infra");
    tokio::time::sleep(Duration::from_secs(3)).await;
    evict_one(&d, &d.pods().await).await;
    wait_two_pods_only(&d).await;
    let victim = d.pods().await[0].metadata.name.clone().expect("pod name");
    d.kubectl_ok(&["delete", "pod", "-n", NAMESPACE, &victim])
        .await;
    wait_two_pods_only(&d).await;
    peak.sample(&d).await;
    d.kubectl_ok(&[
        "rollout",
        "restart",
        "-n",
        NAMESPACE,
        &format!("deployment/{NAME}"),
    ])
    .await;
    d.rollout_status().await;
    wait_two_pods_only(&d).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tally = client.stop().await;
    eprintln!(
        "node tier: a replica evicted, one deleted, the Deployment rolled: {}",
        tally.summary()
    );
    assert!(
        tally.wrong.is_empty() && tally.failed.is_empty(),
        "{}\nwrong: {:?}\nfailed: {:?}\n{}",
        tally.summary(),
        tally.wrong,
        tally.failed,
        d.explain().await
    );
    assert!(
        tally.denied >= 20 && tally.allowed >= 20,
        "{}",
        tally.summary()
    );

    // The certificate rotated: each pod serves the new one on new connections, no restart.
    let pods = d.pods().await;
    let before: Vec<_> = pods.iter().map(restarts_and_uid).collect();
    let ca = d.cluster().cp.pki().ca_pem();
    let first = der_of(&d.serving[0].cert);
    for pod in &pods {
        assert_eq!(
            served_certificate(pod_ip(pod), &ca).await.as_deref(),
            Some(&first[..])
        );
    }
    let new = der_of(&d.rotate_serving_certificate().await.cert);
    for pod in &pods {
        let ip = pod_ip(pod);
        let (ca, new) = (&ca, &new);
        wait_for(
            || async move {
                Ok(served_certificate(ip, ca)
                    .await
                    .filter(|served| served == new)
                    .map(|_| ()))
            },
            Duration::from_secs(90),
            "the rotated certificate served by the pod",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let after: Vec<_> = d.pods().await.iter().map(restarts_and_uid).collect();
    assert_eq!(before, after, "no pod restarted or replaced");
    let out = d
        .kubectl(&["delete", "machineosconfig", "worker", "--dry-run=server"])
        .await;
    assert!(
        out.stderr.contains("cannot be deleted yet"),
        "the API server still reaches the guard after the rotation: {out:?}"
    );

    // The NetworkPolicy is in place and selects the pods on their named ports.
    assert_network_policy(&d, &d.pods().await).await;

    // Memory under all of the above, as the kernel accounts it, within the limit.
    let memory = peak.sample(&d).await;
    eprintln!("node tier: pod memory: {}", peak.summary());
    assert_eq!(
        memory.limit, MEMORY_LIMIT,
        "the kubelet applied the manifests' limit"
    );
    assert!(peak.peak < MEMORY_LIMIT, "{}", peak.summary());

    // Settled: allowed through the Service.
    d.cluster().sim.release(&rollout.node);
    wait_rolled_out(d.cluster(), &rollout.build.image).await;
    wait_for(
        || async {
            Ok(d.cluster()
                .check(&BIN, "worker", &[])
                .code
                .filter(|c| *c == 0))
        },
        STEP_TIMEOUT,
        "the pool settled (check worker exit 0)",
    )
    .await
    .expect("settled");
    let out = d.kubectl(&["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}\n{}", d.explain().await);
}

/// What the manifests' securityContext and mounts promise, as the kernel sees the guard's
/// process: user 65532 (the image's, `runAsNonRoot`), no capabilities at all (`drop: [ALL]`),
/// no new privileges, a seccomp filter (`RuntimeDefault`), a read-only root and TLS volume,
/// the ServiceAccount token mounted, and the in-cluster configuration pointing at the
/// `kubernetes` Service (whose ClusterIP kube-proxy routes; the pod is Ready, so its caches
/// synced through it).
fn assert_runs_as_shipped(d: &Deployed, pod: &Pod) {
    let uid = pod.metadata.uid.as_deref().expect("pod uid");
    let pids =
        d.nc.node
            .pod_processes(uid)
            .unwrap_or_else(|e| panic!("{e}"));
    let guard = pids
        .iter()
        .find(|pid| read_proc(**pid, "comm").trim() == "mosc-guard")
        .unwrap_or_else(|| panic!("no mosc-guard process among the pod's {pids:?}"));
    let status = read_proc(*guard, "status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no {name} in /proc/{guard}/status"))
    };
    assert_eq!(field("Uid"), "65532 65532 65532 65532");
    assert_eq!(field("Gid"), "65532 65532 65532 65532");
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(caps), "0000000000000000", "{caps}");
    }
    assert_eq!(field("NoNewPrivs"), "1");
    assert_eq!(field("Seccomp"), "2", "a seccomp filter");
    let mounts = read_proc(*guard, "mountinfo");
    let options_of = |point: &str| {
        mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.get(4) == Some(&point)).then(|| f.get(5).copied().unwrap_or_default())
            })
            .next_back()
            .unwrap_or_else(|| panic!("{point} is not mounted: {mounts}"))
            .to_owned()
    };
    for point in [
        "/",
        "/etc/mosc-guard/tls",
        "/var/run/secrets/kubernetes.io/serviceaccount",
    ] {
        assert!(
            options_of(point).split(',').any(|o| o == "ro"),
            "{point} read-only: {}",
            options_of(point)
        );
    }
    let environ = read_proc(*guard, "environ");
    assert!(
        environ
            .split('\0')
            .any(|v| v == "KUBERNETES_SERVICE_HOST=10.0.0.1"),
        "in-cluster configuration through the kubernetes Service"
    );
}

fn read_proc(pid: u32, file: &str) -> String {
    std::fs::read(format!("/proc/{pid}/{file}"))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn pod_ip(pod: &Pod) -> IpAddr {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse().ok())
        .expect("the pod has an IP")
}

/// (pod uid, container restart count, container id): unchanged means not restarted.
fn restarts_and_uid(pod: &Pod) -> (String, i32, String) {
    let container = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .expect("container status");
    (
        pod.metadata.uid.clone().unwrap_or_default(),
        container.restart_count,
        container.container_id.clone().unwrap_or_default(),
    )
}

/// Evicts `pods[0]` through the Eviction API, as `kubectl drain` does, once the
/// PodDisruptionBudget allows one disruption (the disruption controller computed its status
/// from the two Ready pods).
async fn evict_one(d: &Deployed, pods: &[Pod]) {
    let client = d.cluster().client.clone();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    let status = || {
        let budgets = budgets.clone();
        async move {
            let pdb = budgets.get(NAME).await?;
            Ok::<_, kube::Error>(pdb.status.unwrap_or_default())
        }
    };
    let allowed = wait_for(
        || async { Ok((status().await?.disruptions_allowed == 1).then_some(())) },
        Duration::from_secs(60),
        "the PodDisruptionBudget allowing one disruption",
    )
    .await;
    if let Err(e) = allowed {
        panic!("{e}\n{}", d.explain().await);
    }
    let api: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let victim = pods[0].metadata.name.clone().expect("pod name");
    api.evict(&victim, &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("evicting {victim}: {e}"));
}

/// Waits until exactly two of the guard's pods exist (none still terminating) and both are
/// Ready: a deleted replica has drained and its replacement serves.
async fn wait_two_pods_only(d: &Deployed) {
    let api: Api<Pod> = Api::namespaced(d.cluster().client.clone(), NAMESPACE);
    let result = wait_for(
        || {
            let api = api.clone();
            async move {
                let pods = api
                    .list(
                        &kube::api::ListParams::default()
                            .labels("app.kubernetes.io/name=mosc-guard"),
                    )
                    .await?
                    .items;
                let ready = pods.iter().filter(|p| is_ready(p)).count();
                Ok((pods.len() == 2 && ready == 2).then_some(()))
            }
        },
        ROLLOUT_TIMEOUT,
        "two Ready pods and no other",
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}", d.explain().await);
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The base NetworkPolicy exists, selects every pod, and its ports name the pods' ports.
/// (Its enforcement needs a CNI with a policy engine: the bridge plugin here has none, so
/// nothing here can show it refusing a connection.)
async fn assert_network_policy(d: &Deployed, pods: &[Pod]) {
    let api: Api<NetworkPolicy> = Api::namespaced(d.cluster().client.clone(), NAMESPACE);
    let policy = api.get(NAME).await.expect("the NetworkPolicy is applied");
    let spec = policy.spec.expect("spec");
    let selector = spec
        .pod_selector
        .and_then(|s| s.match_labels)
        .unwrap_or_default();
    assert!(!selector.is_empty(), "selects by label");
    for pod in pods {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert!(
            selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "selects {:?}",
            pod.metadata.name
        );
        let names: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| p.name.clone())
            .collect();
        for rule in spec.ingress.iter().flatten() {
            for port in rule.ports.iter().flatten() {
                let named = serde_json::to_value(&port.port).expect("port");
                assert!(
                    named.as_str().is_some_and(|n| names.iter().any(|m| m == n)),
                    "port {named} is one the pod names ({names:?})"
                );
            }
        }
    }
}

/// The largest pod memory seen (cgroup peak and RSS) across samples.
#[derive(Default)]
struct MemoryPeak {
    peak: u64,
    rss: u64,
    samples: Vec<PodMemory>,
}

impl MemoryPeak {
    /// Samples every pod; returns the last pod's figures.
    async fn sample(&mut self, d: &Deployed) -> PodMemory {
        let mut last = None;
        for pod in d.pods().await {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let memory = d.nc.node.pod_memory(&uid).unwrap_or_else(|e| panic!("{e}"));
            self.peak = self.peak.max(memory.peak);
            self.rss = self.rss.max(memory.rss);
            self.samples.push(memory);
            last = Some(memory);
        }
        last.expect("a pod to sample")
    }

    fn summary(&self) -> String {
        const MIB: f64 = 1024.0 * 1024.0;
        format!(
            "peak cgroup usage {:.1} MiB (page cache included), largest RSS {:.1} MiB, limit {:.0} MiB, {} samples",
            self.peak as f64 / MIB,
            self.rss as f64 / MIB,
            MEMORY_LIMIT as f64 / MIB,
            self.samples.len()
        )
    }
}
