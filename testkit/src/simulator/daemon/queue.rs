//! One node's place in its daemon's work queue (`workqueue.NewTypedRateLimitingQueueWithConfig`
//! with `ItemExponentialFailureRateLimiter(1 s, 60 s)`, daemon.go, release-4.20 to main): every
//! node event (`handleNodeEvent` -> `enqueueDefault` -> `AddRateLimited`) and every failed pass
//! (`handleErr` -> `AddRateLimited`) counts one more requeue and puts the next pass
//! `base * 2^requeues` away, at most the cap; only a successful pass (`Forget`) starts the count
//! over. So a node whose update keeps failing slows down with every event on it (its own
//! `SetDegraded` included), not only with every failure. Here the base is
//! [`crate::simulator::SimConfig::retry_interval`] and the cap
//! [`crate::simulator::SimConfig::retry_cap`].

use std::time::{Duration, Instant};

/// A node's queue entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct NodeQueue {
    /// `NumRequeues`: rate-limited adds since the last `Forget`.
    requeues: u32,
    /// When the queued item is handed to a worker; `None`: not queued (a pass may run now).
    due: Option<Instant>,
    /// The node's resourceVersion as last seen: a new one is a node event.
    seen: Option<String>,
}

impl NodeQueue {
    /// `AddRateLimited` at `now`: waits `base * 2^requeues` (at most `cap`); an item already
    /// queued keeps the earlier time (the delaying queue's dedup).
    pub(super) fn add_rate_limited(&mut self, now: Instant, base: Duration, cap: Duration) {
        let wait = base.saturating_mul(1 << self.requeues.min(16)).min(cap);
        self.requeues = self.requeues.saturating_add(1);
        let at = now + wait;
        self.due = Some(self.due.map_or(at, |d| d.min(at)));
    }

    /// Records the node's resourceVersion; a change after the first sight is a node event.
    pub(super) fn observe(
        &mut self,
        version: Option<&str>,
        now: Instant,
        base: Duration,
        cap: Duration,
    ) {
        let changed = self.seen.as_deref() != version;
        let first = self.seen.is_none();
        self.seen = version.map(str::to_owned);
        if changed && !first {
            self.add_rate_limited(now, base, cap);
        }
    }

    /// Whether a worker may take the item at `now`.
    pub(super) fn ready(&self, now: Instant) -> bool {
        self.due.is_none_or(|d| d <= now)
    }

    /// Whether the item waits in the queue for its time.
    pub(super) fn queued(&self) -> bool {
        self.due.is_some()
    }

    /// A worker takes the item (a pass starts).
    pub(super) fn take(&mut self) {
        self.due = None;
    }

    /// `Forget`: a pass succeeded (or found nothing to do); the count starts over.
    pub(super) fn forget(&mut self) {
        self.requeues = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_secs(1);
    const CAP: Duration = Duration::from_secs(60);

    fn wait(q: &NodeQueue, now: Instant) -> Duration {
        q.due
            .map_or(Duration::ZERO, |d| d.saturating_duration_since(now))
    }

    /// Events alone grow the wait (a simulator that grew it only on failed passes fails here);
    /// a successful pass starts over; the cap holds.
    #[test]
    fn every_node_event_grows_the_wait_until_a_pass_succeeds() {
        let now = Instant::now();
        let mut q = NodeQueue::default();
        q.observe(Some("1"), now, BASE, CAP);
        assert!(q.ready(now), "first sight: no wait");
        for (rv, want) in [("2", 1), ("3", 2), ("4", 4)] {
            q.take();
            q.observe(Some(rv), now, BASE, CAP);
            assert_eq!(wait(&q, now), Duration::from_secs(want), "after event {rv}");
        }
        q.observe(Some("4"), now, BASE, CAP);
        assert_eq!(q.requeues, 3, "no new resourceVersion, no event");
        q.take();
        q.forget();
        q.observe(Some("5"), now, BASE, CAP);
        assert_eq!(
            wait(&q, now),
            BASE,
            "a successful pass started the count over"
        );
        q.take();
        for _ in 0..20 {
            q.add_rate_limited(now, BASE, CAP);
            q.take();
        }
        q.add_rate_limited(now, BASE, CAP);
        assert_eq!(wait(&q, now), CAP);
    }

    #[test]
    fn a_queued_item_keeps_its_earlier_time() {
        let now = Instant::now();
        let mut q = NodeQueue::default();
        q.add_rate_limited(now, BASE, CAP);
        q.add_rate_limited(now, BASE, CAP);
        assert_eq!(
            wait(&q, now),
            BASE,
            "the second add (2 s) does not push it back"
        );
        assert!(!q.ready(now) && q.ready(now + BASE));
    }
}
