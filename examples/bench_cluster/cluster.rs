//! The cluster the benchmark measures on: N realistic nodes, created 32 at a time, and the
//! churn that updates their status at a kubelet's rate while it measures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use testkit::Result;
use testkit::mco;
use testkit::realistic;

/// Creates `n` nodes, 32 requests at a time.
pub async fn create_nodes(client: &kube::Client, n: usize, image: &str) -> Result<()> {
    let nodes = mco::nodes(client);
    let started = Instant::now();
    let mut creates = futures::stream::iter(0..n)
        .map(|i| {
            let nodes = nodes.clone();
            let image = image.to_string();
            async move {
                let node = realistic::node(i, "worker", &image, &image, "Done");
                match nodes.create(&PostParams::default(), &node).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err::<(), testkit::Error>(e.into()),
                }
            }
        })
        .buffer_unordered(32);
    let mut done = 0usize;
    while let Some(result) = creates.next().await {
        result?;
        done += 1;
        if done.is_multiple_of(10_000) {
            eprintln!("  {done} nodes created ({:.0?})", started.elapsed());
        }
    }
    eprintln!("  {n} nodes created in {:.1?}", started.elapsed());
    Ok(())
}

/// Updates node status at `per_hour` updates per node per hour, spread evenly, until `stop`.
/// Returns how many updates were made.
pub fn start_churn(
    client: kube::Client,
    n: usize,
    per_hour: u64,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let rate = n as f64 * per_hour as f64 / 3600.0;
        if rate <= 0.0 {
            return;
        }
        let nodes = mco::nodes(&client);
        let interval = Duration::from_secs_f64(1.0 / rate);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next = 0usize;
        let in_flight = Arc::new(tokio::sync::Semaphore::new(16));
        while !stop.load(Ordering::Relaxed) {
            tick.tick().await;
            // Spread over the nodes in a fixed stride, as independent kubelets would.
            next = (next + 7919) % n;
            let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                return;
            };
            let (nodes, count) = (nodes.clone(), Arc::clone(&count));
            let name = realistic::node_name(next);
            tokio::spawn(async move {
                let now = chrono_now();
                let patch = json!({"status": {"conditions": realistic::conditions(&now)}});
                if nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                    .is_ok()
                {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
        }
    })
}

/// RFC 3339 UTC time now, to the second.
pub fn chrono_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
