//! A watch on pool worker for the whole run: a Degraded state between two polls would otherwise
//! go unseen.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use testkit::mco;

use crate::POOL;

/// What a watch on pool worker saw: every status the pool had, as the API server stored it.
#[derive(Clone, Default)]
pub(crate) struct Seen {
    /// Objects observed (initial list and every change).
    pub(crate) updates: usize,
    /// The first Degraded/NodeDegraded=True observed, with its reason and message.
    pub(crate) degraded: Option<String>,
    /// Whether the initial list finished.
    pub(crate) synced: bool,
    /// Re-lists after the first: the watch was interrupted and may have missed states.
    pub(crate) relists: usize,
}

pub(crate) struct PoolWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PoolWatch {
    pub(crate) fn start(client: kube::Client) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={POOL}"));
            let mut events = watcher(mco::mcps(&client), config)
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(mut seen) = shared.lock() else { return };
                match event {
                    Ok(watcher::Event::Apply(pool) | watcher::Event::InitApply(pool)) => {
                        seen.updates += 1;
                        if seen.degraded.is_none() {
                            seen.degraded = degraded(&pool);
                        }
                    }
                    Ok(watcher::Event::Init) if seen.synced => seen.relists += 1,
                    Ok(watcher::Event::InitDone) => seen.synced = true,
                    Ok(_) => {}
                    Err(e) => tracing::warn!("pool watch: {e}"),
                }
            }
        });
        Self { seen, task }
    }

    pub(crate) fn snapshot(&self) -> Seen {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub(crate) fn synced(&self) -> bool {
        self.snapshot().synced
    }

    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

/// `Some("<type>: <reason> <message>")` when Degraded or NodeDegraded is True.
fn degraded(pool: &DynamicObject) -> Option<String> {
    ["NodeDegraded", "Degraded"].iter().find_map(|t| {
        let c = mco::condition(pool, t)?;
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
        (text("status") == "True").then(|| format!("{t}: {} {}", text("reason"), text("message")))
    })
}
