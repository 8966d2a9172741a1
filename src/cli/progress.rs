//! Progress lines on stderr with the time since a run started (`prune --apply`'s and `recover
//! --apply`'s).

use std::time::Instant;

/// Progress lines on stderr, each with the time since the run started.
pub(crate) struct Clock(Instant);

impl Clock {
    pub(crate) fn start() -> Self {
        Clock(Instant::now())
    }

    pub(crate) fn line(&self, text: impl AsRef<str>) {
        eprintln!(
            "[{:>7.1}s] {}",
            self.0.elapsed().as_secs_f64(),
            text.as_ref()
        );
    }

    /// Seconds since the start, to a tenth.
    pub(crate) fn seconds(&self) -> f64 {
        (self.0.elapsed().as_secs_f64() * 10.0).round() / 10.0
    }
}
