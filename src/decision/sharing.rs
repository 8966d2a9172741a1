//! Verdicts shared by concurrent requests for the same target, so a burst for one deletion scans
//! the nodes once, not once each (at 50,000 nodes an allow reads every node; BENCHMARKS.md). The
//! key is the whole typed object the request carries, so requests whose objects differ in
//! anything, a forged one included, are decided apart. How long a verdict is shared is the
//! holder's: [`super::confirmation::Confirmation`] per read, the engine while a decision runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use crate::core::model::{MachineOSBuild, MachineOSConfig};
use crate::core::policy::{Deletion, Verdict};

/// Verdicts by target (or anything decided per target, `T`).
#[derive(Debug)]
pub struct SharedVerdicts<T = Verdict> {
    /// By the target's name, then the whole target: a name has one entry unless requests
    /// disagree on the object.
    by_name: Mutex<ByName<T>>,
}

/// Shared verdicts by the target's name, then the whole target.
type ByName<T> = HashMap<String, Vec<(Target, Shared<T>)>>;

impl<T> Default for SharedVerdicts<T> {
    fn default() -> Self {
        Self {
            by_name: Mutex::default(),
        }
    }
}

/// A verdict decided, or being decided, for the requests that share it.
type Shared<T> = Arc<OnceCell<T>>;

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

impl<T: Clone> SharedVerdicts<T> {
    /// The verdict on `target`: `decide` runs for the first request that asks; the others wait
    /// for it without holding a thread, and share its result, for as long as this lasts.
    pub async fn get_or_decide(&self, target: Deletion<'_>, decide: impl FnOnce() -> T) -> T {
        let shared = self.entry(target);
        let verdict = shared.get_or_init(|| async { decide() }).await;
        verdict.clone()
    }

    /// [`SharedVerdicts::get_or_decide`], shared only by the requests that ask while it is being
    /// decided: once decided it is forgotten, and the next request decides again.
    pub async fn while_deciding(&self, target: Deletion<'_>, decide: impl FnOnce() -> T) -> T {
        let shared = self.entry(target);
        let verdict = shared.get_or_init(|| async { decide() }).await.clone();
        let mut by_name = self.lock();
        if let Some(same_name) = by_name.get_mut(name_of(target)) {
            same_name.retain(|(_, s)| !Arc::ptr_eq(s, &shared));
            if same_name.is_empty() {
                by_name.remove(name_of(target));
            }
        }
        verdict
    }

    fn entry(&self, target: Deletion<'_>) -> Shared<T> {
        let mut by_name = self.lock();
        let same_name = by_name.entry(name_of(target).to_string()).or_default();
        if let Some((_, shared)) = same_name.iter().find(|(t, _)| t.is(target)) {
            return Arc::clone(shared);
        }
        let shared = Shared::default();
        same_name.push((Target::of(target), Arc::clone(&shared)));
        shared
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByName<T>> {
        self.by_name.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
