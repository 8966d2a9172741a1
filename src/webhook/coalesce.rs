//! Coalesced confirming reads: concurrent callers share one fresh read instead of starting one
//! each, so a burst of requests (garbage collection deleting many builds, or forged reviews)
//! costs the API server at most two node lists, not one per request.
//!
//! Sharing must not weaken freshness: a caller may only use a read that *started after it
//! arrived*, or it could be answered from a list taken before the change it must see (a node
//! targeted just before the delete). So one read runs at a time; callers arriving while it
//! runs wait for the next one, which starts when the current one ends and serves all of them.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Mutex;

/// Runs reads one at a time and hands each caller the result of a read that started after
/// the caller arrived.
pub struct Coalesced<T> {
    /// Reads started so far; a read's number is its position in that sequence.
    started: AtomicU64,
    /// The most recent read's number and result. Held while a read runs, so callers queue.
    last: Mutex<Option<(u64, Arc<T>)>>,
}

impl<T> Default for Coalesced<T> {
    fn default() -> Self {
        Self {
            started: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }
}

impl<T> Coalesced<T> {
    /// The result of a read that started after this call: the one a caller that arrived
    /// earlier started meanwhile, or a new one run by `read`. If the caller is dropped while
    /// its read runs (a timeout), the read is dropped too and the next waiter starts its own.
    pub async fn get<F, Fut>(&self, read: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let arrived = self.started.load(Ordering::SeqCst);
        let mut last = self.last.lock().await;
        if let Some((number, result)) = last.as_ref()
            && *number > arrived
        {
            return Arc::clone(result);
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
        let shared = Arc::new(Coalesced::<u64>::default());
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
}
