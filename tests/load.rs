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

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use support::controlplane::ControlPlane;
use support::mco;
use support::net::free_port;
use support::process::ChildProcess;

const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
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
            mosb.metadata.labels = Some([(mco::LABEL_MOSC.to_owned(), pool.to_owned())].into());
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
                    support::realistic::node(i, "worker", &image(2), &image(1), "Working")
                }
                0 | 1 => support::realistic::node(i, "worker", &image(1), &image(1), "Done"),
                _ => support::realistic::node(i, "infra", &image(3), &image(3), "Done"),
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
// The serving certificate in a Secret-volume layout, rotated as kubelet does.

struct SecretVolume {
    dir: PathBuf,
    generation: usize,
}

impl SecretVolume {
    /// `dir/tls.crt -> ..data/tls.crt`, `..data -> ..<generation>`.
    fn new(dir: &Path, pair: &support::pki::CertPair) -> Self {
        std::fs::create_dir_all(dir).expect("volume dir");
        let mut v = Self {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        v.write(pair);
        for f in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).expect("symlink");
        }
        v
    }

    /// A new timestamped directory with the pair, then `..data` swapped to it by a rename (the
    /// one atomic step), then the old directory removed: kubelet's AtomicWriter.
    fn write(&mut self, pair: &support::pki::CertPair) {
        let old = format!("..2026_11_30_00_00_00.{:09}", self.generation);
        self.generation += 1;
        let new = format!("..2026_11_30_00_00_00.{:09}", self.generation);
        let data = self.dir.join(&new);
        std::fs::create_dir(&data).expect("timestamped dir");
        std::fs::copy(&pair.cert, data.join("tls.crt")).expect("copy cert");
        std::fs::copy(&pair.key, data.join("tls.key")).expect("copy key");
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&new, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        let _ = std::fs::remove_dir_all(self.dir.join(old));
    }
}

fn der_of(pem_file: &Path) -> Vec<u8> {
    CertificateDer::pem_file_iter(pem_file)
        .expect("read cert")
        .next()
        .expect("one certificate")
        .expect("PEM")
        .as_ref()
        .to_vec()
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
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": mco::GROUP, "version": "v1", "kind": "MachineOSConfig"},
                "resource": {"group": mco::GROUP, "version": "v1", "resource": "machineosconfigs"},
                "requestKind": {"group": mco::GROUP, "version": "v1", "kind": "MachineOSConfig"},
                "requestResource": {"group": mco::GROUP, "version": "v1", "resource": "machineosconfigs"},
                "name": name,
                "operation": "DELETE",
                "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
                "object": null,
                "oldObject": old,
                "dryRun": true,
                "options": {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}
            }
        })
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_under_load_and_certificate_rotation_answers_every_request() {
    let rate = env_or("MOSC_GUARD_LOAD_RATE", 50).max(1);
    let seconds = env_or("MOSC_GUARD_LOAD_SECONDS", 4).max(1);
    let rotations = env_or("MOSC_GUARD_LOAD_ROTATIONS", 2) as usize;
    let node_count = env_or("MOSC_GUARD_LOAD_NODES", 40) as usize;

    let cp = ControlPlane::start().await.expect("control plane");
    let (worker, infra) = seed(&cp, node_count).await;

    // The guard, serving from a Secret-volume layout it re-reads every second.
    let dir = support::temp_dir("mosc-guard-load-").expect("temp dir");
    let port = free_port().expect("port");
    let certs: Vec<support::pki::CertPair> = (0..=rotations)
        .map(|k| {
            cp.pki()
                .server_cert(&format!("mosc-guard-load-{port}-{k}"), &["127.0.0.1"])
                .expect("serving certificate")
        })
        .collect();
    let mut volume = SecretVolume::new(&dir.path().join("tls"), &certs[0]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mosc-guard"));
    cmd.arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .arg("--tls-cert-file")
        .arg(volume.dir.join("tls.crt"))
        .arg("--tls-key-file")
        .arg(volume.dir.join("tls.key"))
        .args(["--tls-reload-interval", "1"])
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG");
    let log = dir.path().join("mosc-guard.log");
    let mut guard = ChildProcess::spawn("mosc-guard", cmd, &log).expect("spawn guard");
    let base = format!("https://127.0.0.1:{port}");
    let ca = cp.pki().ca_pem();
    let roots = support::tls::client_config(&ca).expect("tls");
    let kept_alive = reqwest::Client::builder()
        .tls_backend_preconfigured(roots.clone())
        .http1_only()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    // A new TLS connection per request, without session resumption (a resumed session is
    // not served a certificate): full handshakes keep happening across rotations.
    let mut no_resumption = roots.clone();
    no_resumption.resumption = rustls::client::Resumption::disabled();
    let fresh = reqwest::Client::builder()
        .tls_backend_preconfigured(no_resumption)
        .http1_only()
        .pool_max_idle_per_host(0)
        .tls_info(true)
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    guard
        .wait_ready(
            "GET /readyz",
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let (c, url) = (kept_alive.clone(), format!("{base}/readyz"));
                async move {
                    let r = c.get(url).send().await?;
                    if r.status().is_success() {
                        Ok(())
                    } else {
                        Err(format!("readyz {}", r.status()).into())
                    }
                }
            },
        )
        .await
        .expect("guard ready");
    let pid = guard.pid();
    let validate = format!("{base}/validate");
    let (worker, infra) = (Arc::new(worker), Arc::new(infra));

    // Warm-up: one of each, answered as expected, before RSS is taken.
    for (i, kind) in [Kind::Deny, Kind::Allow, Kind::Malformed]
        .into_iter()
        .enumerate()
    {
        let uid = format!("warm-{i}");
        send(
            &kept_alive,
            &validate,
            kind,
            &uid,
            body(kind, &uid, &worker, &infra),
        )
        .await
        .expect("warm-up request");
    }
    let rss_before = rss_kib(pid);

    let ders: Vec<Vec<u8>> = certs.iter().map(|c| der_of(&c.cert)).collect();
    // Rotations, spread over the run; each waits until a new connection gets the new
    // certificate (bounded) before the next.
    let total = rate * seconds;
    let rotator = {
        let (fresh, base) = (fresh.clone(), base.clone());
        let ders = ders.clone();
        let spacing = Duration::from_secs_f64(seconds as f64 / (rotations as f64 + 1.0));
        tokio::spawn(async move {
            let mut observed = 0;
            for k in 1..=rotations {
                tokio::time::sleep(spacing).await;
                volume.write(&certs[k]);
                for _ in 0..100 {
                    let served = fresh
                        .get(format!("{base}/healthz"))
                        .send()
                        .await
                        .ok()
                        .and_then(|r| r.extensions().get::<reqwest::tls::TlsInfo>().cloned())
                        .and_then(|t| t.peer_certificate().map(<[u8]>::to_vec));
                    if served.as_deref() == Some(ders[k].as_slice()) {
                        observed += 1;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            (observed, volume)
        })
    };

    // RSS sampled every 100 ms while the load runs (bounded: stops after the run's length
    // plus a minute even if nobody says so).
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut peak = 0;
            for _ in 0..(seconds + 60) * 10 {
                peak = peak.max(rss_kib(pid));
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        })
    };

    // The load: one request every 1/rate s (open loop: a slow answer does not slow the
    // sender), one in ten on a fresh connection.
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        tick.tick().await;
        let kind = kind_of(i);
        let client = if i % 10 == 3 {
            fresh.clone()
        } else {
            kept_alive.clone()
        };
        let (url, uid) = (validate.clone(), format!("load-{i}"));
        let payload = body(kind, &uid, &worker, &infra);
        tasks.spawn(async move {
            let t = Instant::now();
            let result = send(&client, &url, kind, &uid, payload).await;
            (kind, t.elapsed(), result)
        });
    }
    let sent_in = started.elapsed();
    let mut latencies: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
    let mut errors: Vec<String> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (kind, took, result) = joined.expect("request task");
        latencies.entry(kind).or_default().push(took);
        if let Err(e) = result {
            errors.push(e);
        }
    }
    let elapsed = started.elapsed();
    let (observed, _volume) = rotator.await.expect("rotator");
    let rss_after = rss_kib(pid);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let rss_peak = sampler.await.expect("sampler").max(rss_after);
    let metrics = kept_alive
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    guard.stop();
    let log_text = std::fs::read_to_string(&log).expect("guard log");
    let reloads = log_text.matches("serving certificate reloaded").count();
    let reload_warnings = log_text.matches("serving certificate not reloaded").count();

    println!(
        "load: {total} requests sent in {:.1} s ({:.1}/s), all answered after {:.1} s; {} errors; \
         {node_count} nodes",
        sent_in.as_secs_f64(),
        total as f64 / sent_in.as_secs_f64(),
        elapsed.as_secs_f64(),
        errors.len()
    );
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
    println!(
        "  rotations {rotations}: {observed} served to a new connection, {reloads} reloads logged, \
         {reload_warnings} reads kept the previous pair"
    );
    println!(
        "  guard RSS before {:.1} MiB, after {:.1} MiB ({:+.1}%), peak {:.1} MiB",
        mib(rss_before),
        mib(rss_after),
        100.0 * (rss_after as f64 - rss_before as f64) / rss_before.max(1) as f64,
        mib(rss_peak),
    );
    for line in metrics.lines().filter(|l| {
        l.starts_with("mosc_guard_admission_decisions_total")
            || l.starts_with("mosc_guard_confirmations_total")
    }) {
        println!("  {line}");
    }

    // The expiry gauge follows the rotations: it names the last certificate's notAfter.
    let expiry = metrics.lines().find_map(|l| {
        l.strip_prefix("mosc_guard_serving_certificate_expiry_timestamp_seconds ")
            .and_then(|v| v.trim().parse::<i64>().ok())
    });
    let last = ders
        .last()
        .and_then(|d| mosc_guard::webhook::cert_expiry::not_after(d));
    println!("  expiry gauge {expiry:?}, last certificate's notAfter {last:?}");

    if !errors.is_empty() {
        print!("  failed requests by kind:\n{}", summarize(&errors));
    }
    assert!(
        errors.is_empty(),
        "{} failed requests:\n{}",
        errors.len(),
        summarize(&errors)
    );
    assert_eq!(observed, rotations, "rotations served to a new connection");
    assert_eq!(
        reloads,
        rotations,
        "one reload per rotation:\n{}",
        guard.log_tail(40)
    );
    assert!(
        expiry.is_some() && expiry == last,
        "expiry gauge {expiry:?} vs {last:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Through the API server.

/// Rates (requests/s) to try, from `MOSC_GUARD_LOAD_API_RATES` (comma-separated).
fn api_rates() -> Vec<u64> {
    match std::env::var("MOSC_GUARD_LOAD_API_RATES") {
        Ok(v) => v
            .split(',')
            .map(|r| {
                r.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("MOSC_GUARD_LOAD_API_RATES={v:?}: {e}"))
            })
            .collect(),
        Err(_) => vec![20],
    }
}

/// One dry-run deletion through the API server: MOSC worker must be refused by the webhook,
/// MOSC infra allowed.
async fn delete_through_api(client: &kube::Client, kind: Kind) -> Result<(), String> {
    let name = if kind == Kind::Allow {
        "infra"
    } else {
        "worker"
    };
    let params = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    match (kind, mco::moscs(client).delete(name, &params).await) {
        (Kind::Allow, Ok(_)) => Ok(()),
        (Kind::Deny, Err(kube::Error::Api(s)))
            if s.code == 403 && s.message.contains("cannot be deleted yet") =>
        {
            Ok(())
        }
        (kind, other) => Err(format!("{kind:?}: {:?}", other.map(|_| "deleted"))),
    }
}

/// Dry-run deletions through kube-apiserver, which calls the guard as its validating webhook,
/// at each rate of `MOSC_GUARD_LOAD_API_RATES` for `MOSC_GUARD_LOAD_API_SECONDS` (one in ten an
/// allow that needs the confirming read). The ladder stops at the first rate with an error or
/// that the machine does not sustain (sent below 95% of it); the first rate must be clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_through_the_api_server_answer_every_request() {
    let rates = api_rates();
    let seconds = env_or("MOSC_GUARD_LOAD_API_SECONDS", 3).max(1);
    let node_count = env_or("MOSC_GUARD_LOAD_NODES", 40) as usize;
    let cp = ControlPlane::start().await.expect("control plane");
    seed(&cp, node_count).await;
    let guard = support::guard::Guard::start(&cp).await.expect("guard");
    support::guard::register_validating_webhook(&cp, &guard)
        .await
        .expect("register webhook");
    let client = cp.client();
    for kind in [Kind::Deny, Kind::Allow] {
        delete_through_api(&client, kind)
            .await
            .expect("warm-up deletion");
    }

    let mut first_errors: Option<Vec<String>> = None;
    let mut best = None;
    for rate in rates {
        let total = rate * seconds;
        let started = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..total {
            tick.tick().await;
            let kind = if i % 10 == 5 { Kind::Allow } else { Kind::Deny };
            let client = client.clone();
            tasks.spawn(async move {
                let t = Instant::now();
                let r = delete_through_api(&client, kind).await;
                (kind, t.elapsed(), r)
            });
        }
        let sent_in = started.elapsed();
        let mut latencies: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
        let mut errors = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (kind, took, r) = joined.expect("request task");
            latencies.entry(kind).or_default().push(took);
            if let Err(e) = r {
                errors.push(e);
            }
        }
        let achieved = total as f64 / sent_in.as_secs_f64();
        println!(
            "through the API server: {rate}/s for {seconds} s: {total} dry-run deletions, sent at \
             {achieved:.1}/s, all answered after {:.1} s; {} errors",
            started.elapsed().as_secs_f64(),
            errors.len()
        );
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
        let clean = errors.is_empty();
        let sustained = achieved >= 0.95 * rate as f64;
        if first_errors.is_none() {
            first_errors = Some(errors.clone());
        }
        if !clean {
            print!("  failed requests by kind:\n{}", summarize(&errors));
        }
        if !(clean && sustained) {
            break;
        }
        best = Some(rate);
    }
    println!("through the API server: highest rate sustained with 0 errors: {best:?} requests/s");
    let first_errors = first_errors.unwrap_or_default();
    assert!(
        first_errors.is_empty(),
        "failed requests at the first rate:\n{}\n{}",
        summarize(&first_errors),
        guard.log_tail(40)
    );
}
