//! Load, two ways.
//!
//! `webhook_under_load_and_certificate_rotation_answers_every_request`: load and certificate
//! rotation, directly over HTTPS. The real `mosc-guard serve` process,
//! connected to a real kube-apiserver + etcd seeded with realistic nodes (about 20 labels and 30
//! annotations each, several of them JSON as OVN-Kubernetes and the CSI driver write them), gets
//! AdmissionReviews at a fixed rate: denials decided from the cache (a node is rolling to the
//! worker config's image), allows that need the confirming fresh read (the infra config's pool
//! has settled), and malformed bodies. Meanwhile its serving certificate is rotated as kubelet
//! updates a Secret volume (a new timestamped directory, then the `..data` symlink swapped by a
//! rename), and each rotation is waited for until a new TLS connection is served the new
//! certificate.
//!
//! Asserted (counts, never timings): every request answered as expected (HTTP 200 with the
//! right verdict and uid, 400 for a malformed body; no transport error), every rotation served,
//! and one reload logged per rotation. Printed: achieved rate, p50/p99 per kind, the guard's
//! RSS before and after, its decision and confirmation counters.
//!
//! Short by default (`make test`: 50 requests/s for 4 s, 2 rotations, 40 nodes). `make load` runs
//! the figures of RELIABILITY.md: `MOSC_GUARD_LOAD_RATE=500 MOSC_GUARD_LOAD_SECONDS=60
//! MOSC_GUARD_LOAD_ROTATIONS=10 MOSC_GUARD_LOAD_NODES=120`, release profile. All requests are
//! dry runs, so denials record no Event (an Event write per denial would load the API server,
//! not the webhook).
//!
//! `deletions_through_the_api_server_answer_every_request`: the guard registered as the API
//! server's validating webhook (the product's manifest), dry-run deletions of MOSC worker (denied
//! by the webhook) and infra (allowed) sent to kube-apiserver at each rate of
//! `MOSC_GUARD_LOAD_API_RATES` (default 20) for `MOSC_GUARD_LOAD_API_SECONDS` (3) s, stopping at the
//! first rate with an error or not sustained; prints the highest clean rate. The first rate
//! must be clean.
//!
//! One test binary: the seeded cluster, the request kinds and the measurements are here, the two
//! load tests in [`direct`] (over HTTPS, with certificate rotation) and [`through_api_server`]
//! (dry-run deletions through kube-apiserver at increasing rates).

mod direct;
mod through_api_server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::guard::GuardBin;
use testkit::mco;
use testkit::net::free_port;
use testkit::review::{MACHINE_OS_CONFIG, Review};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

/// One tick every 1/`rate` s, open loop: a late tick fires at once (a slow answer does not slow
/// the sender).
fn open_loop(rate: u64) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    tick
}

fn env_or(name: &str, default: u64) -> u64 {
    testkit::env_number(name, default)
}

fn image(n: u8) -> String {
    format!("{REPO}@sha256:{}", format!("{n:02x}").repeat(32))
}

// ---------------------------------------------------------------------------------------------
// The cluster.

/// Pools worker (rolling to image 2: its first 3 nodes have not reached it) and infra (settled
/// on image 3), their MachineOSConfigs and builds. Returns the two configs as the API server
/// holds them (the requests' oldObjects).
async fn seed(cp: &ControlPlane, nodes: usize) -> (Value, Value) {
    let client = cp.client();
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "mosc-guard"}})).expect("namespace");
    kube::Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace mosc-guard (for the guard's Lease)");
    for (pool, updating) in [("worker", "True"), ("infra", "False")] {
        let mcp = kube::api::DynamicObject::new(pool, &mco::mcp_resource()).data(json!({
            "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{pool}"): ""}},
                     "paused": false}
        }));
        mco::mcps(&client)
            .create(&PostParams::default(), &mcp)
            .await
            .expect("create pool");
        mco::mcps(&client)
            .patch_status(
                pool,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "conditions": [{"type": "Updating", "status": updating, "reason": "",
                                    "message": "", "lastTransitionTime": "2026-11-30T00:00:00Z"}],
                    "machineCount": nodes, "updatedMachineCount": 0
                }})),
            )
            .await
            .expect("pool status");
    }
    for (pool, builds) in [("worker", &[1u8, 2][..]), ("infra", &[3][..])] {
        let current = image(builds[builds.len() - 1]);
        let mosc = kube::api::DynamicObject::new(pool, &mco::mosc_resource()).data(json!({
            "spec": {
                "machineConfigPool": {"name": pool},
                "imageBuilder": {"imageBuilderType": "Job"},
                "renderedImagePushSecret": {"name": "push-secret"},
                "renderedImagePushSpec": format!("{REPO}:latest"),
            }
        }));
        mco::moscs(&client)
            .create(&PostParams::default(), &mosc)
            .await
            .expect("create MOSC");
        for &b in builds {
            let name = format!("{pool}-{b:032x}");
            let mut mosb =
                kube::api::DynamicObject::new(&name, &mco::mosb_resource()).data(json!({
                    "spec": {
                        "machineConfig": {"name": format!("rendered-{pool}-{b}")},
                        "machineOSConfig": {"name": pool},
                        "renderedImagePushSpec": format!("{REPO}:{name}"),
                    }
                }));
            mosb.metadata = testkit::scenario::objects::owned_by_mosc(&client, pool, &name, None)
                .await
                .expect("MOSB metadata");
            let api = mco::mosbs(&client);
            api.create(&PostParams::default(), &mosb)
                .await
                .expect("create MOSB");
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"digestedImagePushSpec": image(b)}})),
            )
            .await
            .expect("MOSB status");
        }
        mco::moscs(&client)
            .patch_status(
                pool,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"currentImagePullSpec": current}})),
            )
            .await
            .expect("MOSC status");
    }
    let api = mco::nodes(&client);
    let created = futures::stream::iter(0..nodes)
        .map(|i| {
            let node = match i % 3 {
                0 if i < 9 => {
                    testkit::realistic::node(i, "worker", &image(2), &image(1), "Working")
                }
                0 | 1 => testkit::realistic::node(i, "worker", &image(1), &image(1), "Done"),
                _ => testkit::realistic::node(i, "infra", &image(3), &image(3), "Done"),
            };
            let api = api.clone();
            async move { api.create(&PostParams::default(), &node).await }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for c in created {
        c.expect("create node");
    }
    let get = |name: &'static str| {
        let api = mco::moscs(&client);
        async move { serde_json::to_value(api.get(name).await.expect("get MOSC")).expect("json") }
    };
    (get("worker").await, get("infra").await)
}

// ---------------------------------------------------------------------------------------------
// Requests.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// MOSC worker: denied from the cache.
    Deny,
    /// MOSC infra: allowed after a fresh read of nodes and builds.
    Allow,
    /// A body that is not an AdmissionReview: 400.
    Malformed,
}

/// Out of every 20 requests: 16 denials, 2 allows, 2 malformed.
fn kind_of(i: u64) -> Kind {
    match i % 20 {
        0 | 10 => Kind::Allow,
        5 | 15 => Kind::Malformed,
        _ => Kind::Deny,
    }
}

fn body(kind: Kind, uid: &str, worker: &Value, infra: &Value) -> Vec<u8> {
    let review = |name: &str, old: &Value| {
        Review::delete(MACHINE_OS_CONFIG, old.clone())
            .uid(uid)
            .name(name)
            .dry_run(true)
            .json()
    };
    match kind {
        Kind::Deny => review("worker", worker).to_string().into_bytes(),
        Kind::Allow => review("infra", infra).to_string().into_bytes(),
        Kind::Malformed => {
            let valid = review("worker", worker).to_string();
            match uid.len() % 3 {
                0 => valid.as_bytes()[..valid.len() / 2].to_vec(),
                1 => br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#.to_vec(),
                _ => br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            }
        }
    }
}

/// What went wrong with one request, if anything.
async fn send(
    client: &reqwest::Client,
    url: &str,
    kind: Kind,
    uid: &str,
    body: Vec<u8>,
) -> Result<(), String> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("transport: {e:?}"))?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| format!("body: {e:?}"))?;
    if kind == Kind::Malformed {
        return if status == reqwest::StatusCode::BAD_REQUEST {
            Ok(())
        } else {
            Err(format!("malformed body answered {status}"))
        };
    }
    if status != reqwest::StatusCode::OK {
        return Err(format!(
            "{kind:?}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{kind:?}: not JSON: {e}"))?;
    let want = kind == Kind::Allow;
    if v["response"]["uid"] != uid || v["response"]["allowed"] != want {
        return Err(format!("{kind:?}: unexpected answer {v}"));
    }
    Ok(())
}

/// Failed requests grouped by what went wrong (numbers such as uids masked), most frequent
/// first, one line each: `<count> x <error>`.
fn summarize(errors: &[String]) -> String {
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for e in errors {
        let mut masked = String::new();
        for c in e.chars() {
            if c.is_ascii_digit() {
                if !masked.ends_with('#') {
                    masked.push('#');
                }
            } else {
                masked.push(c);
            }
        }
        let clipped: String = masked.chars().take(300).collect();
        *groups.entry(clipped).or_default() += 1;
    }
    let mut lines: Vec<(usize, String)> = groups.into_iter().map(|(e, n)| (n, e)).collect();
    lines.sort_by_key(|l| std::cmp::Reverse(l.0));
    lines
        .iter()
        .map(|(n, e)| format!("  {n} x {e}\n"))
        .collect()
}

/// One line per request kind: count, p50, p99 and max latency.
fn print_latencies(latencies: BTreeMap<Kind, Vec<Duration>>) {
    for (kind, mut l) in latencies {
        l.sort();
        println!(
            "  {:<10} {:>6} requests  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            format!("{kind:?}"),
            l.len(),
            percentile(&l, 0.50).as_secs_f64() * 1e3,
            percentile(&l, 0.99).as_secs_f64() * 1e3,
            l.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
