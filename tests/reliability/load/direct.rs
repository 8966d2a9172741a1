//! Load and certificate rotation directly over HTTPS: every request answered as expected, every rotation served.

use super::*;

// ---------------------------------------------------------------------------------------------
// The serving certificate in a Secret-volume layout, rotated as kubelet does.

struct SecretVolume {
    dir: PathBuf,
    generation: usize,
}

impl SecretVolume {
    /// `dir/tls.crt -> ..data/tls.crt`, `..data -> ..<generation>`.
    fn new(dir: &Path, pair: &testkit::pki::CertPair) -> Self {
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
    fn write(&mut self, pair: &testkit::pki::CertPair) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_under_load_and_certificate_rotation_answers_every_request() {
    let rate = env_or("MOSC_GUARD_LOAD_RATE", 50).max(1);
    let seconds = env_or("MOSC_GUARD_LOAD_SECONDS", 4).max(1);
    let rotations = env_or("MOSC_GUARD_LOAD_ROTATIONS", 2) as usize;
    let node_count = env_or("MOSC_GUARD_LOAD_NODES", 40) as usize;

    let cp = ControlPlane::start().await.expect("control plane");
    let (worker, infra) = seed(&cp, node_count).await;

    // The guard, serving from a Secret-volume layout it re-reads every second.
    let dir = testkit::temp_dir("mosc-guard-load-").expect("temp dir");
    let port = free_port().expect("port");
    let certs: Vec<testkit::pki::CertPair> = (0..=rotations)
        .map(|k| {
            cp.pki()
                .server_cert(&format!("mosc-guard-load-{port}-{k}"), &["127.0.0.1"])
                .expect("serving certificate")
        })
        .collect();
    let mut volume = SecretVolume::new(&dir.path().join("tls"), &certs[0]);
    let guard = BIN
        .serve(&cp)
        .port(port)
        .tls_files(&volume.dir.join("tls.crt"), &volume.dir.join("tls.key"))
        .args(&["--tls-reload-interval", "1"])
        .env("RUST_LOG", "info")
        .ready_timeout(Duration::from_secs(60))
        .start()
        .await
        .expect("guard ready");
    let base = format!("https://127.0.0.1:{port}");
    let ca = cp.pki().ca_pem();
    let roots = testkit::tls::client_config(&ca).expect("tls");
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
    let mut tick = open_loop(rate);
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
    let log_text = guard.log();
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
    print_latencies(latencies);
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
        .and_then(|d| mosc_guard::server::tls::not_after(d));
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
