//! What the finalizer controller remembers per deferred deletion (attempts, the blocking nodes
//! it last reported): a [`Deferral`] each, and the watch that forgets one once the object is
//! gone, whoever deleted it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};

use crate::core::model::MachineOSConfig;

/// What the controller remembers about one deferred deletion: how often it waited (or a patch
/// failed), and the blocking nodes it last reported in an Event.
#[derive(Default)]
pub(super) struct Deferral {
    pub(super) attempts: u32,
    pub(super) reported: Option<Vec<String>>,
}

/// The deferrals of every object, by uid.
#[derive(Default)]
pub(super) struct Deferrals(Mutex<HashMap<String, Deferral>>);

impl Deferrals {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Deferral>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn with<T>(&self, uid: &str, f: impl FnOnce(&mut Deferral) -> T) -> T {
        f(self.lock().entry(uid.to_string()).or_default())
    }

    pub(super) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| keep(uid));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Drops the deferral of every object the watch sees go, whoever deleted it (the controller is
/// never called for an object that is gone): on a delete event, and after a relist (which
/// follows a broken watch) for every object no longer listed.
pub(super) struct Janitor {
    deferrals: Arc<Deferrals>,
    relisted: Option<HashSet<String>>,
}

impl Janitor {
    pub(super) fn new(deferrals: Arc<Deferrals>) -> Self {
        Self {
            deferrals,
            relisted: None,
        }
    }

    pub(super) async fn run(mut self, api: Api<MachineOSConfig>) {
        let api: Api<PartialObjectMeta<MachineOSConfig>> = Api::all(api.into_client());
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => self.observe(&event),
                Err(e) => {
                    tracing::debug!(error = %e, "finalizer controller: deferral watch failed; retrying")
                }
            }
        }
    }

    fn observe<K: kube::Resource>(&mut self, event: &watcher::Event<K>) {
        use watcher::Event;
        let uid = |m: &K| m.meta().uid.clone().unwrap_or_default();
        match event {
            Event::Delete(m) => self.deferrals.forget(&uid(m)),
            Event::Init => self.relisted = Some(HashSet::new()),
            Event::InitApply(m) => {
                if let Some(seen) = self.relisted.as_mut() {
                    seen.insert(uid(m));
                }
            }
            Event::InitDone => {
                if let Some(seen) = self.relisted.take() {
                    self.deferrals.retain(|uid| seen.contains(uid));
                }
            }
            Event::Apply(_) => {}
        }
    }
}

#[cfg(test)]
mod tests;
