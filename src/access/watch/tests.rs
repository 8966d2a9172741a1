use super::*;

#[test]
fn a_watch_is_stale_after_failing_continuously_and_recovers_on_its_own() {
    let health = WatchHealth::new("pools", Duration::from_secs(30));
    let t0 = Instant::now();
    let at = |s| t0 + Duration::from_secs(s);
    let logged = |new_error, newly_stale| Logged {
        new_error,
        newly_stale,
    };
    assert_eq!(health.stale(t0), None, "healthy");
    assert_eq!(health.failed_at(t0, t0, "403".into()), logged(true, false));
    assert_eq!(
        health.failed_at(at(20), at(20), "403".into()),
        logged(false, false),
        "the same error again is not worth a warning"
    );
    assert_eq!(health.stale(at(29)), None);
    // The streak keeps its start: stale 30 s after the first failure, with the last error.
    assert_eq!(
        health.failed_at(at(31), at(31), "timeout".into()),
        logged(true, true),
        "reported once when it turns stale"
    );
    assert_eq!(
        health.failed_at(at(40), at(40), "timeout".into()),
        logged(false, false)
    );
    let (for_, error) = health.stale(at(41)).expect("stale");
    assert_eq!((for_.as_secs(), error.as_str()), (41, "timeout"));
    // The cache's own data again: healthy at once.
    health.recovered("test");
    assert_eq!(health.stale(at(42)), None);
    // A new streak starts from scratch, or from when the watch went quiet.
    assert_eq!(
        health.failed_at(at(50), at(50), "timeout".into()),
        logged(true, false)
    );
    assert_eq!(health.stale(at(79)), None);
    assert!(health.stale(at(80)).is_some());
    health.recovered("test");
    assert_eq!(
        health.failed_at(at(60), at(90), "quiet since 60".into()),
        logged(true, true)
    );
}

#[tokio::test(start_paused = true)]
async fn retries_double_to_a_low_cap_and_start_over_after_two_quiet_minutes() {
    let mut retry = Retry::new();
    let delays: Vec<Duration> = (0..12).map(|_| retry.next_delay()).collect();
    // Jitter adds up to as much again to each step: 800 ms, 1.6 s, then the 2 s cap.
    for (delay, base) in delays.iter().zip([800, 1600]) {
        let base = Duration::from_millis(base);
        assert!(*delay >= base && *delay <= base * 2, "{delays:?}");
    }
    // However long the outage, the next retry after it ends is at most 4 s away.
    assert!(
        delays[2..]
            .iter()
            .all(|d| *d >= MAX_DELAY && *d <= MAX_DELAY * 2),
        "{delays:?}"
    );
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(retry.next_delay() >= MAX_DELAY, "still the same streak");
    tokio::time::advance(START_OVER_AFTER + Duration::from_secs(1)).await;
    assert!(retry.next_delay() <= FIRST_DELAY * 2, "a new streak");
}
