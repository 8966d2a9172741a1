//! How often a refusal may write a DeletionBlocked Event, so callers of /validate cannot make the
//! guard write Events at any rate: per object a token bucket as client-go's
//! EventSourceObjectSpamFilter (a burst, then one per interval), refusals beyond it only counted
//! and added to the next Event ("and N more refusals"). The table forgets objects not seen for an
//! interval and caps how many it tracks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::core::policy::TargetKind;

/// Events written at once for one object before the rate applies.
const BURST: u32 = 5;
/// Then one Event per this interval per object.
const REFILL: Duration = Duration::from_secs(60);
/// At most this many objects are tracked; beyond it, untracked objects get no Event.
const MAX_OBJECTS: usize = 4096;

#[derive(Debug)]
struct Bucket {
    tokens: u32,
    refilled: Instant,
    suppressed: u64,
}

/// Per-object rate limit for refusal Events.
#[derive(Debug, Default)]
pub struct EventLimiter {
    buckets: Mutex<HashMap<(TargetKind, String), Bucket>>,
}

/// What the limiter allows for one refusal.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Write the Event; `suppressed` refusals of the same object were not written since the
    /// last one.
    Write { suppressed: u64 },
    /// Over the rate: count it, write nothing.
    Suppress,
}

impl EventLimiter {
    /// Takes a token for `kind`/`name` at `now`.
    pub fn admit(&self, kind: TargetKind, name: &str, now: Instant) -> Admit {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let key = (kind, name.to_string());
        if !buckets.contains_key(&key) && buckets.len() >= MAX_OBJECTS {
            // Forget buckets that are full again (no recent refusal), then try once more.
            buckets.retain(|_, b| refill(b, now) < BURST || b.suppressed > 0);
            if buckets.len() >= MAX_OBJECTS {
                return Admit::Suppress;
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: BURST,
            refilled: now,
            suppressed: 0,
        });
        refill(bucket, now);
        if bucket.tokens == 0 {
            bucket.suppressed = bucket.suppressed.saturating_add(1);
            return Admit::Suppress;
        }
        bucket.tokens -= 1;
        Admit::Write {
            suppressed: std::mem::take(&mut bucket.suppressed),
        }
    }
}

/// Adds the tokens earned since the last refill; returns the token count.
fn refill(bucket: &mut Bucket, now: Instant) -> u32 {
    let elapsed = now.saturating_duration_since(bucket.refilled);
    let earned = elapsed.as_secs() / REFILL.as_secs().max(1);
    if earned > 0 {
        let earned = u32::try_from(earned).unwrap_or(u32::MAX);
        bucket.tokens = bucket.tokens.saturating_add(earned).min(BURST);
        bucket.refilled += REFILL * earned;
    }
    bucket.tokens
}

#[cfg(test)]
mod tests;
