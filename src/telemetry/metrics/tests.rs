use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

/// The audit replaces its gauges on a task of its own while scrapes encode: every scrape
/// sees the whole set of series, never a family cleared and only partly set again.
#[test]
fn a_scrape_during_a_replacement_sees_every_series() {
    let metrics = Arc::new(Metrics::default());
    let pools = 200;
    let counts: BTreeMap<_, _> = (0..pools)
        .map(|p| ((format!("pool-{p}"), Need::Pending, Status::Missing), 1))
        .collect();
    metrics.needed_images(&counts);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (metrics, done) = (Arc::clone(&metrics), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                metrics.needed_images(&counts);
            }
        })
    };
    let seen = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("mosc_guard_needed_images{"))
            .count()
    };
    let partial = (0..300)
        .filter(|_| seen(&metrics.render(&[], &[], true)) != pools)
        .count();
    done.store(true, Ordering::Relaxed);
    let joined = writer.join();
    assert!(joined.is_ok(), "the writer panicked");
    assert_eq!(
        partial, 0,
        "scrapes that saw a family cleared or partly set"
    );
}
