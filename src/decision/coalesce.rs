//! Coalesced confirming reads: concurrent callers share one fresh read instead of starting one
//! each, so a burst of requests (garbage collection deleting many builds, or forged reviews)
//! costs the API server one or two node lists, not one per request, and allows that arrive
//! together wait for one read instead of queueing for one each.
//!
//! Sharing must not weaken freshness: a caller may only use a read that *started after it
//! arrived*, or it could be answered from a list taken before the change it must see (a node
//! targeted just before the delete). A caller arrives when it takes its [`Arrival`], which the
//! reviewer does as the request comes in, before the cached decision: a read that started
//! while that decision ran began after the request and may serve it.
//!
//! One read runs at a time. A caller that finds no read it may use starts one, but not before
//! the batching window after its own arrival has passed, so callers arriving just after it
//! share that read (when the cached decision already took longer than the window, nothing is
//! added). Callers arriving while a read runs wait for the next one, which starts when the
//! current one ends and serves all of them.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long a read waits, after its starter arrived, for more callers to share it: the four
/// concurrent deletions of an `oc delete` burst reach the guard within about a millisecond.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(2);

/// When a caller arrived: how many reads had started by then, and the time.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    reads_started: u64,
    at: Instant,
}

/// Runs reads one at a time and hands each caller the result of a read that started after
/// the caller arrived.
pub struct Coalesced<T> {
    /// Reads started so far; a read's number is its position in that sequence.
    started: AtomicU64,
    /// The most recent read's number and result. Held while a read runs (and while its
    /// starter waits out the window), so callers queue.
    last: Mutex<Option<(u64, Arc<T>)>>,
    window: Duration,
}

impl<T> Default for Coalesced<T> {
    fn default() -> Self {
        Self::with_window(DEFAULT_BATCH_WINDOW)
    }
}

impl<T> Coalesced<T> {
    /// Reads that wait `window` after their starter arrived (zero: start at once).
    pub fn with_window(window: Duration) -> Self {
        Self {
            started: AtomicU64::new(0),
            last: Mutex::new(None),
            window,
        }
    }

    /// Marks a caller's arrival: only reads started after this may serve it. Take it as the
    /// request arrives, before work that precedes the read, so reads started meanwhile count.
    pub fn arrive(&self) -> Arrival {
        Arrival {
            reads_started: self.started.load(Ordering::SeqCst),
            at: Instant::now(),
        }
    }

    /// [`Coalesced::get_since`] for a caller arriving now.
    pub async fn get<F, Fut>(&self, read: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        self.get_since(self.arrive(), read).await
    }

    /// The result of a read that started after `arrival`: the one another caller started
    /// meanwhile, or a new one run by `read` once the window after `arrival` has passed. If the
    /// caller is dropped while it waits out the window or while its read runs (a timeout), the
    /// read is dropped too and the next waiter starts its own.
    pub async fn get_since<F, Fut>(&self, arrival: Arrival, read: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let mut last = self.last.lock().await;
        if let Some((number, result)) = last.as_ref()
            && *number > arrival.reads_started
        {
            return Arc::clone(result);
        }
        // Callers arriving during the window read the count before it is raised below, so
        // the read started after it serves them too. (tokio's timer counts whole
        // milliseconds: a window of 2 ms may last up to 3.)
        let opens = arrival.at + self.window;
        if Instant::now() < opens {
            tokio::time::sleep_until(opens).await;
        }
        let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let result = Arc::new(read().await);
        *last = Some((number, Arc::clone(&result)));
        result
    }

    /// How many reads have started (for tests and metrics).
    pub fn reads(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the current-thread runtime of `#[tokio::test]`, spawned tasks run only when the test
    /// task yields; a few yields let every spawned caller reach the lock.
    async fn let_others_run() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_burst_costs_two_reads_and_each_caller_gets_one_started_after_it_arrived() {
        let shared = Arc::new(Coalesced::<u64>::with_window(Duration::ZERO));
        let counter = Arc::new(AtomicU64::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        let first = {
            let (shared, counter, gate) =
                (Arc::clone(&shared), Arc::clone(&counter), Arc::clone(&gate));
            tokio::spawn(async move {
                shared
                    .get(|| async move {
                        let number = counter.fetch_add(1, Ordering::SeqCst) + 1;
                        gate.notified().await;
                        number
                    })
                    .await
            })
        };
        let_others_run().await;
        let mut rest = Vec::new();
        for _ in 0..50 {
            let (shared, counter) = (Arc::clone(&shared), Arc::clone(&counter));
            rest.push(tokio::spawn(async move {
                let arrived = shared.reads();
                let got = shared
                    .get(|| async move { counter.fetch_add(1, Ordering::SeqCst) + 1 })
                    .await;
                (arrived, *got)
            }));
        }
        let_others_run().await;
        gate.notify_one();
        assert_eq!(*first.await.expect("first caller"), 1);
        for caller in rest {
            let (arrived, got) = caller.await.expect("caller");
            assert!(
                got > arrived,
                "read {got} started after the caller saw {arrived} reads"
            );
        }
        assert_eq!(shared.reads(), 2, "the 50 late callers shared one read");
    }

    #[tokio::test]
    async fn a_caller_after_a_finished_read_gets_a_new_one() {
        let shared = Coalesced::<u64>::default();
        let a = shared.get(|| async { 1 }).await;
        let b = shared.get(|| async { 2 }).await;
        assert_eq!((*a, *b), (1, 2));
        assert_eq!(shared.reads(), 2);
    }

    /// What one caller of [`caller`] saw: reads started when it arrived, the read that
    /// served it, and the (paused) time of its arrival and of the start of that read.
    #[derive(Debug)]
    struct Served {
        arrived_after_reads: u64,
        arrived_at: Instant,
        read: u64,
        read_started_at: Instant,
    }

    /// A read that takes `took`: returns its number and when it started.
    fn timed_read(
        counter: &Arc<AtomicU64>,
        took: Duration,
    ) -> impl Future<Output = (u64, Instant)> + use<> {
        let counter = Arc::clone(counter);
        async move {
            let started = Instant::now();
            let number = counter.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(took).await;
            (number, started)
        }
    }

    /// A caller that arrives after `delay`, then works for `before_read` (the cached decision)
    /// before it asks for the read.
    fn caller(
        shared: &Arc<Coalesced<(u64, Instant)>>,
        counter: &Arc<AtomicU64>,
        delay: Duration,
        before_read: Duration,
        took: Duration,
    ) -> tokio::task::JoinHandle<Served> {
        let (shared, counter) = (Arc::clone(shared), Arc::clone(counter));
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let arrival = shared.arrive();
            tokio::time::sleep(before_read).await;
            let got = shared
                .get_since(arrival, || timed_read(&counter, took))
                .await;
            Served {
                arrived_after_reads: arrival.reads_started,
                arrived_at: arrival.at,
                read: got.0,
                read_started_at: got.1,
            }
        })
    }

    fn assert_fresh(served: &Served) {
        assert!(
            served.read > served.arrived_after_reads,
            "served by read {} although {} had started when it arrived: {served:?}",
            served.read,
            served.arrived_after_reads
        );
        assert!(
            served.read_started_at >= served.arrived_at,
            "served by a read that started before it arrived: {served:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn four_callers_within_the_window_share_one_read() {
        // tokio's timer counts whole milliseconds: callers 1 ms apart within a 5 ms window.
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(5)));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        let callers: Vec<_> = [0, 1, 2, 3]
            .into_iter()
            .map(|ms| {
                let delay = Duration::from_millis(ms);
                caller(&shared, &counter, delay, Duration::ZERO, read_time)
            })
            .collect();
        let t0 = Instant::now();
        for c in callers {
            let served = c.await.expect("caller");
            assert_fresh(&served);
            assert_eq!(served.read, 1, "{served:?}");
            assert_eq!(
                served.read_started_at - t0,
                Duration::from_millis(5),
                "the read started when the first caller's window closed"
            );
        }
        assert_eq!(
            shared.reads(),
            1,
            "four callers within the window, one read"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_caller_waits_only_what_its_own_work_left_of_the_window() {
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(2)));
        let counter = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        // A cached decision of 5 ms already covers the 2 ms window: the read starts at once.
        let slow = caller(
            &shared,
            &counter,
            Duration::ZERO,
            Duration::from_millis(5),
            Duration::from_millis(1),
        );
        let served = slow.await.expect("caller");
        assert_eq!(served.read_started_at - t0, Duration::from_millis(5));
        // One of 1 ms waits the remaining 1 ms.
        let t1 = Instant::now();
        let fast = caller(
            &shared,
            &counter,
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::from_millis(1),
        );
        let served = fast.await.expect("caller");
        assert_eq!(served.read_started_at - t1, Duration::from_millis(2));
        assert_eq!(shared.reads(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_arriving_during_a_running_read_gets_the_next_one() {
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(2)));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        let first = caller(&shared, &counter, Duration::ZERO, Duration::ZERO, read_time);
        // Arrives 10 ms in, while read 1 (started at 2 ms) runs; two more arrive later still.
        let late: Vec<_> = [10, 20, 30]
            .into_iter()
            .map(|ms| {
                let delay = Duration::from_millis(ms);
                caller(&shared, &counter, delay, Duration::ZERO, read_time)
            })
            .collect();
        let served = first.await.expect("first");
        assert_fresh(&served);
        assert_eq!(served.read, 1);
        for c in late {
            let served = c.await.expect("late caller");
            assert_fresh(&served);
            assert_eq!(served.read, 2, "the read after the running one: {served:?}");
        }
        assert_eq!(shared.reads(), 2);
    }

    /// A request that arrived before a read started may use it even if its cached decision
    /// ends while the read runs; one that arrived after the read started may not.
    #[tokio::test(start_paused = true)]
    async fn a_read_started_after_the_arrival_serves_a_caller_that_asks_later() {
        let shared = Arc::new(Coalesced::with_window(Duration::ZERO));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        // Starts read 1 at 1 ms.
        let quick = caller(
            &shared,
            &counter,
            Duration::ZERO,
            Duration::from_millis(1),
            read_time,
        );
        // Arrived at 0, before read 1 started; asks at 10 ms while it runs: shares it.
        let early = caller(
            &shared,
            &counter,
            Duration::ZERO,
            Duration::from_millis(10),
            read_time,
        );
        // Arrived at 5 ms, after read 1 started: needs read 2.
        let after = caller(
            &shared,
            &counter,
            Duration::from_millis(5),
            Duration::from_millis(5),
            read_time,
        );
        let (quick, early, after) = (
            quick.await.expect("quick"),
            early.await.expect("early"),
            after.await.expect("after"),
        );
        for s in [&quick, &early, &after] {
            assert_fresh(s);
        }
        assert_eq!((quick.read, early.read, after.read), (1, 1, 2));
        assert_eq!(shared.reads(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_starter_cancelled_in_its_window_or_its_read_strands_no_waiter() {
        for cancel_after in [Duration::from_millis(2), Duration::from_millis(10)] {
            let shared = Arc::new(Coalesced::with_window(Duration::from_millis(5)));
            let counter = Arc::new(AtomicU64::new(0));
            let read_time = Duration::from_millis(50);
            // The starter gives up (its request timed out) in the window, or during its read.
            let starter = {
                let (shared, counter) = (Arc::clone(&shared), Arc::clone(&counter));
                tokio::spawn(async move {
                    tokio::time::timeout(
                        cancel_after,
                        shared.get(|| timed_read(&counter, read_time)),
                    )
                    .await
                    .is_err()
                })
            };
            let waiters: Vec<_> = [0, 1]
                .into_iter()
                .map(|ms| {
                    let delay = Duration::from_millis(1 + ms);
                    caller(&shared, &counter, delay, Duration::ZERO, read_time)
                })
                .collect();
            assert!(starter.await.expect("starter"), "the starter timed out");
            for w in waiters {
                let served = tokio::time::timeout(Duration::from_secs(1), w)
                    .await
                    .expect("a waiter was served after the starter gave up")
                    .expect("waiter");
                assert_fresh(&served);
            }
            assert!(
                shared.reads() <= 2,
                "the waiters shared the read one of them started"
            );
        }
    }
}
