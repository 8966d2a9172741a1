//! The health of one watch, shared by the MCO kinds' caches and the node cache: whether it is
//! failing and since when (a cache failing for `--stale-after` makes the webhook unready), and
//! the probe that cuts a grown backoff short once the API server answers again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Whether a watch is failing, and since when: a watch that has failed continuously for
/// `--stale-after` leaves its cache stale (the webhook is then not ready). Only the cache's
/// own data clears it (a completed list, an accepted watch): a probe that reaches the API
/// server again wakes the cache's driver (`reachable`) instead of waiting out its backoff.
#[derive(Default)]
pub(crate) struct WatchHealth {
    failing: Mutex<Option<Failing>>,
    probing: AtomicBool,
    reachable: Notify,
}

struct Failing {
    since: Instant,
    error: String,
    reported: bool,
    /// A probe already woke the driver in this streak: from then on its retries follow their
    /// backoff, so an API server that answers probes but fails the cache's own (possibly
    /// large) list is not asked for it every second.
    woken: bool,
}

impl WatchHealth {
    /// The watch delivered an event; returns how long it had been failing, if it was.
    pub(crate) fn succeeded(&self) -> Option<Duration> {
        let was = self.lock().take();
        was.map(|f| f.since.elapsed())
    }

    /// The watch failed at `now` with `error`; a failure streak keeps its start. Returns true
    /// the first time the streak reaches `stale_after` (to log it once).
    pub(crate) fn failed(&self, now: Instant, error: String, stale_after: Duration) -> bool {
        let mut failing = self.lock();
        let f = failing.get_or_insert_with(|| Failing {
            since: now,
            error: String::new(),
            reported: false,
            woken: false,
        });
        f.error = error;
        let newly_stale = !f.reported && now.saturating_duration_since(f.since) >= stale_after;
        f.reported |= newly_stale;
        newly_stale
    }

    /// How long the watch has been failing and its last error, once that is `stale_after` or
    /// longer at `now`.
    pub(crate) fn stale(&self, now: Instant, stale_after: Duration) -> Option<(Duration, String)> {
        let failing = self.lock();
        let f = failing.as_ref()?;
        let for_ = now.saturating_duration_since(f.since);
        (for_ >= stale_after).then(|| (for_, f.error.clone()))
    }

    pub(crate) fn is_failing(&self) -> bool {
        self.lock().is_some()
    }

    /// True if the watch is failing, no probe is running, and none woke the driver yet in this
    /// streak (the caller starts one).
    fn start_probe(&self) -> bool {
        if self.lock().as_ref().is_none_or(|f| f.woken) {
            return false;
        }
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// A probe got through: wakes the driver, once per failing streak.
    fn wake(&self) {
        if let Some(f) = self.lock().as_mut() {
            f.woken = true;
        }
        // Before the driver wakes, so a failure after the streak ends can start a new probe.
        self.probing.store(false, Ordering::Release);
        self.reachable.notify_one();
    }

    /// Sleeps for `delay`, or less if a probe finds the API server reachable meanwhile: a
    /// backoff grown during an outage (up to 30 s) would otherwise hold a cache stale that long
    /// after the outage ended.
    pub(crate) async fn back_off(&self, delay: Duration) {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = self.reachable.notified() => {}
        }
    }

    /// Resolves when a probe finds the API server reachable again (see [`probe`]).
    pub(crate) fn reachable(&self) -> tokio::sync::futures::Notified<'_> {
        self.reachable.notified()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Failing>> {
        self.failing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How often a failing watch's resource is probed, and the bound of one probe.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Logs a recovery if the watch was failing.
pub(crate) fn recovered(health: &WatchHealth, what: &'static str, how: &'static str) {
    if let Some(failed_for) = health.succeeded() {
        tracing::info!(cache = what, failed_for = ?failed_for, how, "watch recovered");
    }
}

/// Starts a probe of a failing watch's resource unless one is running or one already woke
/// the driver in this failing streak: every second it tries `attempt` (what the watch needs: a
/// list and a watch, each small) until it works, then wakes the cache's driver
/// (`WatchHealth::reachable`) to list or watch again at once. The probe itself clears nothing:
/// a cache is healthy again only once its own list or watch succeeds, so `/readyz` does not
/// turn 200 while the data is still behind.
pub(crate) fn probe<F, Fut>(health: &Arc<WatchHealth>, what: &'static str, attempt: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send,
{
    if !health.start_probe() {
        return;
    }
    let health = Arc::clone(health);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            if !health.is_failing() {
                break;
            }
            match tokio::time::timeout(PROBE_TIMEOUT, attempt()).await {
                Ok(Ok(())) => {
                    tracing::info!(cache = what, "the API server answers again; retrying now");
                    health.wake();
                    return;
                }
                Ok(Err(e)) => tracing::debug!(cache = what, error = %e, "probe failed"),
                Err(_) => tracing::debug!(cache = what, "probe timed out"),
            }
        }
        health.probing.store(false, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_stale_after_failing_continuously_and_recovers_on_its_own() {
        let health = WatchHealth::default();
        let after = Duration::from_secs(30);
        let t0 = Instant::now();
        assert_eq!(health.stale(t0, after), None, "healthy");
        assert!(!health.failed(t0, "403 forbidden".into(), after));
        assert!(!health.failed(t0 + Duration::from_secs(20), "403 again".into(), after));
        assert_eq!(health.stale(t0 + Duration::from_secs(29), after), None);
        // The streak keeps its start: stale 30 s after the first failure, with the last error.
        assert!(
            health.failed(t0 + Duration::from_secs(31), "403 still".into(), after),
            "reported once when it turns stale"
        );
        assert!(!health.failed(t0 + Duration::from_secs(40), "403 still".into(), after));
        let (for_, error) = health
            .stale(t0 + Duration::from_secs(41), after)
            .expect("stale");
        assert_eq!((for_.as_secs(), error.as_str()), (41, "403 still"));
        // One event from the watch again: healthy at once.
        assert!(health.succeeded().is_some());
        assert_eq!(health.stale(t0 + Duration::from_secs(42), after), None);
        assert!(health.succeeded().is_none());
        // A new streak starts from scratch.
        assert!(!health.failed(t0 + Duration::from_secs(50), "timeout".into(), after));
        assert_eq!(health.stale(t0 + Duration::from_secs(79), after), None);
        assert!(health.stale(t0 + Duration::from_secs(80), after).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_reaches_the_api_server_cuts_the_backoff_short_but_clears_nothing() {
        use std::sync::atomic::AtomicUsize;
        let health = Arc::new(WatchHealth::default());
        health.failed(
            Instant::now(),
            "connection refused".into(),
            Duration::from_secs(30),
        );
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&attempts);
        let attempt = move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(kube::Error::LinesCodecMaxLineLengthExceeded)
                } else {
                    Ok(())
                }
            }
        };
        probe(&health, "nodes", attempt.clone());
        probe(&health, "nodes", attempt);
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        let waited = started.elapsed();
        // Two failed probes and a good one, a second apart: woken after 3 s, not 30 s, and by
        // one probe only (the second call found it running).
        assert_eq!(waited, Duration::from_secs(3));
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert!(
            health.is_failing(),
            "only the cache's own list or watch clears it"
        );
        // Once per failing streak: a retry that fails again follows its backoff.
        probe(&health, "nodes", || async { Ok(()) });
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        // A new streak may be cut short again.
        assert!(health.succeeded().is_some());
        health.failed(
            Instant::now(),
            "connection refused".into(),
            Duration::from_secs(30),
        );
        probe(&health, "nodes", || async { Ok(()) });
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_probe_the_backoff_runs_its_course() {
        let health = WatchHealth::default();
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(4)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }
}
