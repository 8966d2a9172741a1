//! How every watch retries, and whether it is healthy: the one retry engine shared by the MCO
//! kinds' reflectors and the node cache (kube's `DefaultBackoff`, its cap lowered from 30 s to
//! 2 s so the next retry after an outage is at most 4 s away; at 30 s a cache sat out 34.5 s after
//! an API server restart, RELIABILITY.md), and the failing streak that makes a cache stale. A watch
//! is failing from its first error until the cache's own data shows it current again (a completed
//! list, or a change or an accepted watch); failing for `--stale-after` makes `/readyz` 503.

use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// kube's `DefaultBackoff` but for the cap (the module doc says why).
const FIRST_DELAY: Duration = Duration::from_millis(800);
const MAX_DELAY: Duration = Duration::from_secs(2);
const START_OVER_AFTER: Duration = Duration::from_secs(120);

/// The retry delays of one watch.
pub(crate) struct Retry(ResetTimerBackoff<ExponentialBackoff>);

impl Retry {
    pub(crate) fn new() -> Self {
        let policy = backon::ExponentialBuilder::default()
            .with_min_delay(FIRST_DELAY)
            .with_max_delay(MAX_DELAY)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self(ResetTimerBackoff::new(policy.into(), START_OVER_AFTER))
    }

    fn next_delay(&mut self) -> Duration {
        // Without a limit on attempts the policy never ends; the cap stands in if it did.
        self.0.next().unwrap_or(MAX_DELAY)
    }

    /// Sleeps for the next delay.
    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

/// Whether one cache's watch is failing, and since when.
pub(crate) struct WatchHealth {
    cache: &'static str,
    stale_after: Duration,
    failing: Mutex<Option<Failing>>,
}

struct Failing {
    since: Instant,
    error: String,
    reported: bool,
}

/// What a failure is worth logging.
#[derive(Debug, PartialEq, Eq)]
struct Logged {
    /// The first failure of its streak, or a different error than the last.
    new_error: bool,
    /// The streak has just reached `--stale-after`.
    newly_stale: bool,
}

impl WatchHealth {
    pub(crate) fn new(cache: &'static str, stale_after: Duration) -> Self {
        Self {
            cache,
            stale_after,
            failing: Mutex::new(None),
        }
    }

    /// The cache's own data shows it current again (`how`); logs the recovery of a failing
    /// watch.
    pub(crate) fn recovered(&self, how: &'static str) {
        if let Some(f) = self.lock().take() {
            let failed_for = f.since.elapsed();
            tracing::info!(cache = self.cache, failed_for = ?failed_for, how, "watch recovered");
        }
    }

    /// The watch failed with `error`; a streak not yet running starts at `since`. Logs the
    /// error when the streak starts or the error changes (every retry at debug level: at 2-4 s
    /// apart an outage would flood the log), and once when the streak turns stale.
    pub(crate) fn failed(&self, since: Instant, error: &dyn Display) {
        let logged = self.failed_at(since, Instant::now(), error.to_string());
        if logged.new_error {
            tracing::warn!(cache = self.cache, %error, "watch failed; retrying with backoff");
        } else {
            tracing::debug!(cache = self.cache, %error, "watch failed again");
        }
        if logged.newly_stale {
            tracing::warn!(
                cache = self.cache,
                stale_after = ?self.stale_after,
                "cache stale: its watch has been failing since; /readyz answers 503 until it recovers"
            );
        }
    }

    /// [`Self::failed`] at `now`.
    fn failed_at(&self, since: Instant, now: Instant, error: String) -> Logged {
        let mut failing = self.lock();
        let f = failing.get_or_insert_with(|| Failing {
            since,
            error: String::new(),
            reported: false,
        });
        let new_error = f.error != error;
        f.error = error;
        let newly_stale = !f.reported && now.saturating_duration_since(f.since) >= self.stale_after;
        f.reported |= newly_stale;
        Logged {
            new_error,
            newly_stale,
        }
    }

    /// How long the watch has been failing and its last error, once that is `--stale-after`
    /// or longer at `now`.
    pub(crate) fn stale(&self, now: Instant) -> Option<(Duration, String)> {
        let failing = self.lock();
        let f = failing.as_ref()?;
        let for_ = now.saturating_duration_since(f.since);
        (for_ >= self.stale_after).then(|| (for_, f.error.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Failing>> {
        self.failing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
