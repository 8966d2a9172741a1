//! One confirming read and the verdicts decided on it: every request the read serves for the
//! same target is decided once ([`SharedVerdicts`]). Sharing the read ([`super::coalesce`]) is
//! not enough: each request would still re-decide on the fresh snapshot.
//!
//! Freshness is the read's: a verdict is shared only among the requests one read serves, each
//! of which arrived before that read started.

use crate::access::view::Fresh;
use crate::core::policy::{Deletion, Verdict};

use super::sharing::SharedVerdicts;

/// A confirming read, and the verdicts decided on it so far.
#[derive(Debug)]
pub struct Confirmation {
    fresh: Fresh,
    verdicts: SharedVerdicts,
}

impl Confirmation {
    pub fn new(fresh: Fresh) -> Self {
        Self {
            fresh,
            verdicts: SharedVerdicts::default(),
        }
    }

    /// What the read returned.
    pub fn fresh(&self) -> &Fresh {
        &self.fresh
    }

    /// The verdict on `target` decided on this read: `decide` runs for the first request with
    /// this target; the others share its result.
    pub async fn verdict(
        &self,
        target: Deletion<'_>,
        decide: impl FnOnce(&Fresh) -> Verdict,
    ) -> Verdict {
        self.verdicts
            .get_or_decide(target, || decide(&self.fresh))
            .await
    }
}
