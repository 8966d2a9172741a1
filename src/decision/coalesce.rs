//! Coalesced confirming reads: concurrent callers share fresh reads instead of starting one
//! each, so a burst of requests (garbage collection deleting many builds, or forged reviews)
//! costs the API server a few reads, not one per request, and allows that arrive together
//! wait for one read instead of queueing for one each.
//!
//! Sharing must not weaken freshness: a caller may only use a read that *started after it
//! arrived*, or it could be answered from a list taken before the change it must see (a node
//! targeted just before the delete). A caller arrives when it takes its [`Arrival`], which the
//! engine does as the request comes in.
//!
//! A caller asks for its read as it arrives ([`Coalesced::start_since`]): it joins a read it may
//! use (one not started yet, or started after its arrival), or opens one. A read runs on a task
//! of its own, so it is in flight while the caller works (the verdict from the caches): it
//! starts once the batching window after its opener's arrival has passed, so callers arriving
//! just after share it, and once fewer than [`READS_AT_ONCE`] reads run. A read ends early only
//! if every caller that could use it gave up (a timeout): the last one's handle aborts it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// How long a read waits, after its opener arrived, for more callers to share it: the four
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

/// What a read's task fills in, shared by its callers.
struct Shared<T> {
    /// Its position in the sequence of reads started; 0 until it starts.
    number: AtomicU64,
    /// When it started and its result, once it has them.
    started: watch::Sender<Option<Instant>>,
    result: watch::Sender<Option<Arc<T>>>,
}

/// A caller's hold on one read. The read is aborted once no caller holds it any more.
pub struct Read<T> {
    shared: Arc<Shared<T>>,
    task: AbortHandle,
}

impl<T> Drop for Read<T> {
    fn drop(&mut self) {
        // The last holder is gone: nobody may use the result (a finished read is unaffected).
        self.task.abort();
    }
}

impl<T> Read<T> {
    fn number(&self) -> u64 {
        self.shared.number.load(Ordering::SeqCst)
    }

    fn finished(&self) -> bool {
        self.shared.result.borrow().is_some()
    }

    /// Whether it started after `arrival`, or has not started yet.
    fn serves(&self, arrival: Arrival) -> bool {
        let number = self.number();
        number == 0 || number > arrival.reads_started
    }

    /// Its result, and when it started.
    pub async fn wait(&self) -> (Arc<T>, Instant) {
        let mut result = self.shared.result.subscribe();
        let value = match result.wait_for(Option::is_some).await {
            Ok(value) => value.clone(),
            // The sender lives in `shared`, which this handle holds: never closed.
            Err(_) => None,
        };
        let started = *self.shared.started.borrow();
        match (value, started) {
            (Some(value), Some(started)) => (value, started),
            // Unreachable (a result is set only after its start): wait for ever rather than
            // answer without a read; the caller's deadline ends it.
            _ => std::future::pending().await,
        }
    }
}

/// Runs reads, at most [`READS_AT_ONCE`] at a time, and hands each caller a read that started
/// after the caller arrived.
pub struct Coalesced<T> {
    /// Reads started so far.
    started: Arc<AtomicU64>,
    /// The reads a caller may still join: those some caller holds.
    reads: Mutex<Vec<Weak<Read<T>>>>,
    running: Arc<Semaphore>,
    window: Duration,
}

impl<T> Default for Coalesced<T> {
    fn default() -> Self {
        Self::with_window(DEFAULT_BATCH_WINDOW)
    }
}

impl<T> Coalesced<T> {
    /// Reads that wait `window` after their opener arrived (zero: start at once).
    pub fn with_window(window: Duration) -> Self {
        Self {
            started: Arc::new(AtomicU64::new(0)),
            reads: Mutex::default(),
            running: Arc::new(Semaphore::new(READS_AT_ONCE)),
            window,
        }
    }

    /// Marks a caller's arrival: only reads started after this may serve it.
    pub fn arrive(&self) -> Arrival {
        Arrival {
            reads_started: self.started.load(Ordering::SeqCst),
            at: Instant::now(),
        }
    }

    /// How many reads have started.
    pub fn reads(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

impl<T: Send + Sync + 'static> Coalesced<T> {
    /// A read that started after `arrival`: one another caller opened, or a new one that
    /// `read` makes on a task of its own, once the window after `arrival` has passed and a read
    /// may start. Call it as the caller arrives; [`Read::wait`] for the result.
    pub fn start_since<F, Fut>(&self, arrival: Arrival, read: F) -> Arc<Read<T>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        let live: Vec<Arc<Read<T>>> = reads.iter().filter_map(Weak::upgrade).collect();
        reads.retain(|r| r.strong_count() > 0);
        // The one that will end first: a finished one, else the earliest started, else one
        // not started yet.
        let usable = live.iter().filter(|r| r.serves(arrival)).min_by_key(|r| {
            match (r.finished(), r.number()) {
                (true, _) => 0,
                (false, 0) => u64::MAX,
                (false, number) => number,
            }
        });
        if let Some(read) = usable {
            return Arc::clone(read);
        }
        let shared = Arc::new(Shared {
            number: AtomicU64::new(0),
            started: watch::Sender::new(None),
            result: watch::Sender::new(None),
        });
        let task = {
            let shared = Arc::clone(&shared);
            let (started, running) = (Arc::clone(&self.started), Arc::clone(&self.running));
            let opens = arrival.at + self.window;
            tokio::spawn(async move {
                // Callers arriving during the window read the count before it is raised below,
                // so this read serves them too. (tokio's timer counts whole milliseconds: a
                // window of 2 ms may last up to 3.)
                tokio::time::sleep_until(opens).await;
                // The semaphore is never closed: a permit always comes.
                let _running = running.acquire_owned().await.ok();
                let number = started.fetch_add(1, Ordering::SeqCst) + 1;
                shared.number.store(number, Ordering::SeqCst);
                shared.started.send_replace(Some(Instant::now()));
                let value = Arc::new(read().await);
                shared.result.send_replace(Some(value));
            })
            .abort_handle()
        };
        let read = Arc::new(Read { shared, task });
        reads.push(Arc::downgrade(&read));
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller that asks as it arrives and waits at once.
    async fn get<T: Send + Sync + 'static, Fut: Future<Output = T> + Send + 'static>(
        shared: &Coalesced<T>,
        read: impl FnOnce() -> Fut + Send + 'static,
    ) -> Arc<T> {
        shared.start_since(shared.arrive(), read).wait().await.0
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
    ) -> impl Future<Output = (u64, Instant)> + Send + use<> {
        let counter = Arc::clone(counter);
        async move {
            let started = Instant::now();
            let number = counter.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(took).await;
            (number, started)
        }
    }

    /// A caller that arrives after `delay`, asks for its read, then works for `work` (the
    /// verdict from the caches) before it waits for the read.
    fn caller(
        shared: &Arc<Coalesced<(u64, Instant)>>,
        counter: &Arc<AtomicU64>,
        delay: Duration,
        work: Duration,
        took: Duration,
    ) -> tokio::task::JoinHandle<Served> {
        let (shared, counter) = (Arc::clone(shared), Arc::clone(counter));
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let arrival = shared.arrive();
            let read = shared.start_since(arrival, move || timed_read(&counter, took));
            tokio::time::sleep(work).await;
            let (value, _) = read.wait().await;
            let got = *value;
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

    /// The read is in flight while its caller works: it starts when the window closes, not
    /// after the caller's own work (the verdict from the caches).
    #[tokio::test(start_paused = true)]
    async fn a_read_runs_while_its_caller_works() {
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(2)));
        let counter = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let slow = caller(
            &shared,
            &counter,
            Duration::ZERO,
            Duration::from_millis(30),
            Duration::from_millis(20),
        );
        let served = slow.await.expect("caller");
        assert_eq!(served.read_started_at - t0, Duration::from_millis(2));
        assert_eq!(
            Instant::now() - t0,
            Duration::from_millis(30),
            "the 20 ms read ended inside the caller's 30 ms of work"
        );
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

    /// Callers that arrive before a read starts share it; one that arrives after it started
    /// gets a read of its own.
    #[tokio::test(start_paused = true)]
    async fn a_caller_arriving_after_a_read_started_gets_its_own() {
        let shared = Arc::new(Coalesced::with_window(Duration::from_millis(2)));
        let counter = Arc::new(AtomicU64::new(0));
        let read_time = Duration::from_millis(50);
        let [opener, joiner, late] = [0, 1, 5].map(|ms| {
            let delay = Duration::from_millis(ms);
            caller(&shared, &counter, delay, Duration::ZERO, read_time)
        });
        let (opener, joiner, late) = (
            opener.await.expect("opener"),
            joiner.await.expect("joiner"),
            late.await.expect("late"),
        );
        for s in [&opener, &joiner, &late] {
            assert_fresh(s);
        }
        assert_eq!((opener.read, joiner.read, late.read), (1, 1, 2));
        assert_eq!(shared.reads(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_starter_that_gives_up_strands_no_waiter_and_a_read_nobody_waits_for_ends() {
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
                        get(&shared, move || timed_read(&counter, read_time)),
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
                assert_eq!(served.read, 1, "the read the starter opened goes on");
            }
        }
        // Nobody waits any more: the read is aborted in its window and never starts.
        let shared = Coalesced::<u64>::with_window(Duration::from_millis(5));
        let read = shared.start_since(shared.arrive(), || async { 1 });
        drop(read);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(shared.reads(), 0);
    }
}
