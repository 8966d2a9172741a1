//! One confirming read and the verdicts decided on it: every request the read serves for the
//! same target is decided once. Sharing the read ([`super::coalesce`]) is not enough: each
//! request would still re-decide on the fresh snapshot, and an allow of a settled pool's config
//! reads every node (issue 27 measured four concurrent allows at 4.5x one at 50,000 nodes).
//!
//! Freshness is the read's: a verdict is shared only among the requests one read serves, each
//! of which arrived before that read started. The key is the target as its request carries it,
//! the whole typed object (the verdict reads its name, uid, labels, owners, override annotation,
//! spec and status), so two requests whose objects differ in anything, a forged one included,
//! are decided apart. The policy mode is the engine's, the same for every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use crate::core::model::{MachineOSBuild, MachineOSConfig};
use crate::core::policy::{Deletion, Verdict};
use crate::sources::view::Fresh;

/// A confirming read, and the verdicts decided on it so far, by target.
#[derive(Debug)]
pub struct Confirmation {
    fresh: Fresh,
    /// By the target's name, then the whole target: a name has one entry unless requests
    /// disagree on the object.
    verdicts: Mutex<HashMap<String, Vec<(Target, Shared)>>>,
}

/// A verdict decided, or being decided, for the requests that share it.
type Shared = Arc<OnceCell<Verdict>>;

/// An owned copy of a deletion's target, the key of a shared verdict.
#[derive(Debug, PartialEq)]
enum Target {
    Config(MachineOSConfig),
    Build(MachineOSBuild),
}

impl Target {
    fn of(target: Deletion<'_>) -> Self {
        match target {
            Deletion::MachineOSConfig(c) => Target::Config(c.clone()),
            Deletion::MachineOSBuild(b) => Target::Build(b.clone()),
        }
    }

    fn is(&self, target: Deletion<'_>) -> bool {
        match (self, target) {
            (Target::Config(mine), Deletion::MachineOSConfig(theirs)) => mine == theirs,
            (Target::Build(mine), Deletion::MachineOSBuild(theirs)) => mine == theirs,
            _ => false,
        }
    }
}

fn name_of(target: Deletion<'_>) -> &str {
    match target {
        Deletion::MachineOSConfig(c) => c.name(),
        Deletion::MachineOSBuild(b) => b.name(),
    }
}

impl Confirmation {
    pub fn new(fresh: Fresh) -> Self {
        Self {
            fresh,
            verdicts: Mutex::default(),
        }
    }

    /// What the read returned.
    pub fn fresh(&self) -> &Fresh {
        &self.fresh
    }

    /// The verdict on `target` decided on this read: `decide` runs for the first request with
    /// this target; the others wait for it without holding a thread, and share its result.
    pub async fn verdict(
        &self,
        target: Deletion<'_>,
        decide: impl FnOnce(&Fresh) -> Verdict,
    ) -> Verdict {
        let cell = {
            let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
            let same_name = verdicts.entry(name_of(target).to_string()).or_default();
            match same_name.iter().find(|(t, _)| t.is(target)) {
                Some((_, cell)) => Arc::clone(cell),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    same_name.push((Target::of(target), Arc::clone(&cell)));
                    cell
                }
            }
        };
        let fresh = &self.fresh;
        cell.get_or_init(|| async move { decide(fresh) })
            .await
            .clone()
    }
}
