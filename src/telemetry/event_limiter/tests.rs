use super::*;

#[test]
fn a_burst_then_one_per_interval_and_the_suppressed_count_goes_with_the_next() {
    let limiter = EventLimiter::default();
    let t0 = Instant::now();
    let kind = TargetKind::MachineOSConfig;
    for _ in 0..BURST {
        assert_eq!(
            limiter.admit(kind, "worker", t0),
            Admit::Write { suppressed: 0 }
        );
    }
    for _ in 0..100 {
        assert_eq!(limiter.admit(kind, "worker", t0), Admit::Suppress);
    }
    // Another object has its own bucket.
    assert_eq!(
        limiter.admit(kind, "infra", t0),
        Admit::Write { suppressed: 0 }
    );
    assert_eq!(
        limiter.admit(TargetKind::MachineOSBuild, "worker", t0),
        Admit::Write { suppressed: 0 }
    );
    // One interval later: one more Event, carrying the count of what was held back.
    let later = t0 + REFILL;
    assert_eq!(
        limiter.admit(kind, "worker", later),
        Admit::Write { suppressed: 100 }
    );
    assert_eq!(limiter.admit(kind, "worker", later), Admit::Suppress);
}

#[test]
fn the_table_is_bounded() {
    let limiter = EventLimiter::default();
    let t0 = Instant::now();
    for i in 0..MAX_OBJECTS {
        limiter.admit(TargetKind::MachineOSBuild, &format!("b-{i}"), t0);
    }
    // Every bucket spent a token just now: a new object is not tracked ...
    assert_eq!(
        limiter.admit(TargetKind::MachineOSBuild, "new", t0),
        Admit::Suppress
    );
    // ... until old buckets are full again and can be forgotten.
    assert_eq!(
        limiter.admit(TargetKind::MachineOSBuild, "new", t0 + REFILL),
        Admit::Write { suppressed: 0 }
    );
}
