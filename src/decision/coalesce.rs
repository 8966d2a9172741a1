//! Coalesced confirming reads: concurrent callers share fresh reads, so a burst of requests costs
//! the API server a few reads, not one each. Sharing must not weaken freshness: a caller may only
//! use a read that *started after it arrived* (its [`Arrival`], taken as the request comes in), or
//! it could miss the change it must see. [`Coalesced::start_since`] joins such a read or opens one;
//! a read runs on its own task, starts once its opener's batching window has passed and fewer than
//! [`READS_AT_ONCE`] run, and is aborted only when every caller that could use it gave up.

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
mod tests;
