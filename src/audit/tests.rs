use super::*;

fn known(status: Status, failures: u32, at: Instant) -> Known {
    Known {
        verdict: Answer::new(status, ""),
        at,
        failures,
    }
}

#[test]
fn when_an_image_is_asked_again() {
    let interval = Duration::from_secs(300);
    let t0 = Instant::now();
    let after = |s: u64| t0 + Duration::from_secs(s);
    // Available: every interval.
    let ok = known(Status::Available, 0, t0);
    assert!(!ok.due(after(299), interval));
    assert!(ok.due(after(300), interval));
    // Not available: 30 s, then doubling, never past the interval.
    for (failures, wait) in [(1, 30), (2, 60), (3, 120), (4, 240), (5, 300), (30, 300)] {
        for status in [Status::Missing, Status::Unknown] {
            let k = known(status, failures, t0);
            assert!(!k.due(after(wait - 1), interval), "{failures} failures");
            assert!(k.due(after(wait), interval), "{failures} failures");
        }
    }
}
