//! What every controller loop of the simulator shares: the reconcile pass, the loop that runs
//! it, and the API server's answers they all look for.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::activity::{Activity, IDLE_POLL};
use super::ctx::Ctx;
use crate::Result;

/// One reconcile pass over the current API state.
pub(super) trait Reconciler: Send + 'static {
    fn sync(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// Whether work of the loop's own waits on time: a queued event, a timer, a running task.
    fn waiting(&self) -> bool;
}

/// Runs `reconciler.sync()` one poll interval after the last pass; after a quiet pass (no error,
/// no write by any loop, nothing [`Reconciler::waiting`]), once something changed
/// ([`super::activity`]) or [`IDLE_POLL`] passed. Logs each distinct error once.
pub(super) fn spawn_loop<R: Reconciler>(
    name: &'static str,
    ctx: Ctx,
    reconciler: R,
) -> JoinHandle<()> {
    let (activity, poll) = (ctx.activity, ctx.cfg.poll_interval);
    tokio::spawn(run(name, activity, poll, IDLE_POLL, reconciler))
}

async fn run<R: Reconciler>(
    name: &'static str,
    activity: Activity,
    poll: Duration,
    idle: Duration,
    mut reconciler: R,
) {
    let mut last_error = String::new();
    let mut changes = activity.subscribe();
    loop {
        changes.borrow_and_update();
        let writes = activity.writes();
        let synced = match reconciler.sync().await {
            Ok(()) => {
                last_error.clear();
                true
            }
            Err(e) => {
                let msg = e.to_string();
                if msg != last_error {
                    tracing::warn!("sim {name}: {msg} (will retry)");
                    last_error = msg;
                }
                false
            }
        };
        tokio::time::sleep(poll).await;
        if synced && activity.writes() == writes && !reconciler.waiting() {
            let _ = tokio::time::timeout(idle, changes.changed()).await;
        }
    }
}

/// Now as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
pub(super) fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

/// Whether a kube error is the API server's 404.
pub(super) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is the API server's 409 (conflict / already exists).
pub(super) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use super::*;

    /// Counts its passes; `waiting` as told; with `writes`, writes on every pass.
    struct Counter {
        passes: Arc<AtomicUsize>,
        waiting: bool,
        writes: Option<Activity>,
    }

    impl Reconciler for Counter {
        async fn sync(&mut self) -> Result<()> {
            self.passes.fetch_add(1, Ordering::SeqCst);
            if let Some(activity) = &self.writes {
                activity.wrote();
            }
            Ok(())
        }

        fn waiting(&self) -> bool {
            self.waiting
        }
    }

    const POLL: Duration = Duration::from_millis(10);
    /// Longer than any test here runs: a loop that passes again did not wait for it.
    const IDLE: Duration = Duration::from_secs(600);

    fn start(
        waiting: bool,
        writes: bool,
        activity: &Activity,
    ) -> (Arc<AtomicUsize>, JoinHandle<()>) {
        let passes = Arc::new(AtomicUsize::new(0));
        let counter = Counter {
            passes: Arc::clone(&passes),
            waiting,
            writes: writes.then(|| activity.clone()),
        };
        let task = tokio::spawn(run("test", activity.clone(), POLL, IDLE, counter));
        (passes, task)
    }

    /// Waits (up to 10 s) until `passes` reaches `n`.
    async fn reaches(passes: &AtomicUsize, n: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if passes.load(Ordering::SeqCst) >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// `passes` once it stayed the same for 20 polls (`None` if it never did within 10 s).
    async fn settled(passes: &AtomicUsize) -> Option<usize> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = passes.load(Ordering::SeqCst);
        while Instant::now() < deadline {
            tokio::time::sleep(POLL * 20).await;
            let now = passes.load(Ordering::SeqCst);
            if now == last {
                return Some(now);
            }
            last = now;
        }
        None
    }

    #[tokio::test]
    async fn a_quiet_loop_waits_for_a_change_and_a_busy_one_keeps_passing() {
        let activity = Activity::new();
        let (quiet, quiet_task) = start(false, false, &activity);
        let (waiting, waiting_task) = start(true, false, &activity);
        let (writing, writing_task) = start(false, true, &activity);
        assert!(
            reaches(&writing, 5).await,
            "a loop that writes passes every poll"
        );
        // The writer's writes keep every loop busy; without them the quiet one waits.
        writing_task.abort();
        // A pass already under way when the writer stopped may still end; then none comes.
        let before = settled(&quiet).await.expect("a quiet loop stops passing");
        let waited = waiting.load(Ordering::SeqCst);
        assert!(before >= 1);
        assert!(
            reaches(&waiting, waited + 5).await,
            "a loop with work waiting passes every poll"
        );
        let still = quiet.load(Ordering::SeqCst);
        assert_eq!(still, before, "a quiet loop does not poll");
        activity.changed();
        assert!(reaches(&quiet, before + 1).await, "a change wakes it");
        quiet_task.abort();
        waiting_task.abort();
    }
}
