//! Coalesced confirming reads: concurrent callers share fresh reads instead of starting one
//! each, so a burst of requests (garbage collection deleting many builds, or forged reviews)
//! costs the API server a few node lists, not one per request, and allows that arrive together
//! wait for one read instead of queueing for one each.
//!
//! Sharing must not weaken freshness: a caller may only use a read that *started after it
//! arrived*, or it could be answered from a list taken before the change it must see (a node
//! targeted just before the delete). A caller arrives when it takes its [`Arrival`], which the
//! reviewer does as the request comes in, before the cached decision: a read that started
//! while that decision ran began after the request and may serve it.
//!
//! A caller that finds no read it may use (one not started yet, or started after its arrival)
//! opens one, which starts once the batching window after that caller's arrival has passed, so
//! callers arriving just after it share it (when the cached decision already took longer than
//! the window, nothing is added), and once fewer than [`READS_AT_ONCE`] reads run. Callers that
//! arrive before it starts share it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};
use tokio::time::Instant;

/// How long a read waits, after its starter arrived, for more callers to share it: the four
/// concurrent deletions of an `oc delete` burst reach the guard within about a millisecond.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(2);

/// How many reads may run at once. A caller that arrives while a read runs cannot use it, and
/// if its own read could start only when that one ends it would pay for both; on
/// kube-apiserver, whose consistent reads of quiet collections wait for etcd's next progress
/// notification (requested every 100 ms while a read waits), a read that starts just after one
/// was served waits almost a whole period. Two at once let the late caller's read start at once
/// and usually end with the running one. Still bounded whatever the burst: callers arriving
/// while two run share the read that starts when one of them ends.
pub const READS_AT_ONCE: usize = 2;

/// When a caller arrived: how many reads had started by then, and the time.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    reads_started: u64,
    at: Instant,
}

/// One read, shared by the callers it may serve.
struct Read<T> {
    /// Its position in the sequence of reads started; 0 until it starts.
    number: AtomicU64,
    result: OnceCell<Arc<T>>,
}

impl<T> Read<T> {
    fn number(&self) -> u64 {
        self.number.load(Ordering::SeqCst)
    }

    /// Whether it started after `arrival`, or has not started yet.
    fn serves(&self, arrival: Arrival) -> bool {
        let number = self.number();
        number == 0 || number > arrival.reads_started
    }
}

/// Runs reads, at most [`READS_AT_ONCE`] at a time, and hands each caller the result of a read
/// that started after the caller arrived.
pub struct Coalesced<T> {
    /// Reads started so far.
    started: AtomicU64,
    /// The reads a caller may still use: those not finished, and the newest finished one (for
    /// callers that arrived before it started and ask only now).
    reads: Mutex<Vec<Arc<Read<T>>>>,
    running: Semaphore,
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
            reads: Mutex::default(),
            running: Semaphore::new(READS_AT_ONCE),
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

    /// The result of a read that started after `arrival`: one another caller started or opened
    /// meanwhile, or a new one run by `read` once the window after `arrival` has passed and a
    /// read may start. If the caller running a read is dropped (a timeout) while it waits or
    /// reads, the read is dropped too and a caller waiting for it starts it again.
    pub async fn get_since<F, Fut>(&self, arrival: Arrival, read: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let shared = self.join_or_open(arrival);
        let result = shared.result.get_or_init(|| async {
            // Callers arriving during the window read the count before it is raised below, so
            // this read serves them too. (tokio's timer counts whole milliseconds: a window of
            // 2 ms may last up to 3.)
            let opens = arrival.at + self.window;
            if Instant::now() < opens {
                tokio::time::sleep_until(opens).await;
            }
            // The semaphore is never closed: a permit always comes.
            let _running = self.running.acquire().await.ok();
            let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
            shared.number.store(number, Ordering::SeqCst);
            Arc::new(read().await)
        });
        Arc::clone(result.await)
    }

    /// The read `arrival` may use that will end first (a finished one, else the earliest
    /// started, else one not started yet), or a new one.
    fn join_or_open(&self, arrival: Arrival) -> Arc<Read<T>> {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        let newest_finished = reads
            .iter()
            .filter(|r| r.result.initialized())
            .map(|r| r.number())
            .max();
        // Drop finished reads but the newest, and reads whose every caller gave up.
        reads.retain(|r| {
            if r.result.initialized() {
                Some(r.number()) == newest_finished
            } else {
                r.number() == 0 || Arc::strong_count(r) > 1
            }
        });
        let usable = reads.iter().filter(|r| r.serves(arrival)).min_by_key(|r| {
            match (r.result.initialized(), r.number()) {
                (true, _) => 0,
                (false, 0) => u64::MAX,
                (false, number) => number,
            }
        });
        if let Some(read) = usable {
            return Arc::clone(read);
        }
        let read = Arc::new(Read {
            number: AtomicU64::new(0),
            result: OnceCell::new(),
        });
        reads.push(Arc::clone(&read));
        read
    }

    /// How many reads have started.
    pub fn reads(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller that asks as it arrives.
    async fn get<T, Fut: Future<Output = T>>(
        shared: &Coalesced<T>,
        read: impl FnOnce() -> Fut,
    ) -> Arc<T> {
        shared.get_since(shared.arrive(), read).await
    }

    #[tokio::test]
    async fn a_caller_after_a_finished_read_gets_a_new_one() {
        let shared = Coalesced::<u64>::default();
        let a = get(&shared, || async { 1 }).await;
        let b = get(&shared, || async { 2 }).await;
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
    async fn a_burst_during_a_read_shares_one_read_that_does_not_wait_for_it() {
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(2)));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        let t0 = Instant::now();
        // Read 1 runs from 2 ms to 52 ms; fifty callers arrive at 10 ms.
        let first = caller(&shared, &counter, Duration::ZERO, Duration::ZERO, read_time);
        let burst: Vec<_> = (0..50)
            .map(|_| {
                let delay = Duration::from_millis(10);
                caller(&shared, &counter, delay, Duration::ZERO, read_time)
            })
            .collect();
        assert_eq!(first.await.expect("first").read, 1);
        for c in burst {
            let served = c.await.expect("caller");
            assert_fresh(&served);
            assert_eq!(served.read, 2, "{served:?}");
            assert_eq!(
                served.read_started_at - t0,
                Duration::from_millis(12),
                "read 2 started when its window closed, while read 1 still ran"
            );
        }
        assert_eq!(shared.reads(), 2, "fifty callers, one read");
    }

    #[tokio::test(start_paused = true)]
    async fn with_two_reads_running_the_next_starts_when_one_ends() {
        let shared = Arc::new(Coalesced::with_window(Duration::ZERO));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        let t0 = Instant::now();
        // Read 1 runs from 0 to 50 ms, read 2 from 10 to 60 ms; the callers arriving at 20 and
        // 30 ms share read 3, which starts when read 1 ends.
        let served: Vec<_> = [0, 10, 20, 30]
            .into_iter()
            .map(|ms| {
                let delay = Duration::from_millis(ms);
                caller(&shared, &counter, delay, Duration::ZERO, read_time)
            })
            .collect();
        let mut got = Vec::new();
        for c in served {
            let s = c.await.expect("caller");
            assert_fresh(&s);
            got.push((s.read, (s.read_started_at - t0).as_millis()));
        }
        assert_eq!(got, [(1, 0), (2, 10), (3, 50), (3, 50)]);
        assert_eq!(shared.reads(), 3);
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
                        get(&shared, || timed_read(&counter, read_time)),
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
