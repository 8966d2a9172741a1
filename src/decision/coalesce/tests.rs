use super::*;

impl<T> Coalesced<T> {
    /// How many reads have started.
    pub(crate) fn reads(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

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
