//! What the finalizer controller remembers per deferred deletion (attempts, the blocking nodes
//! it last reported), and the watch that forgets it once the object is gone, whoever deleted it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};

use crate::core::model::MachineOSConfig;

/// What the controller remembers per deferred deletion (by uid): how often it waited, and
/// the blocking nodes it last reported in an Event.
#[derive(Default)]
pub(super) struct Memo {
    pub(super) attempts: u32,
    pub(super) reported: Option<Vec<String>>,
}

/// The memos of every object, by uid.
#[derive(Default)]
pub(super) struct Memos(Mutex<HashMap<String, Memo>>);

impl Memos {
    pub(super) fn with<T>(&self, uid: &str, f: impl FnOnce(&mut Memo) -> T) -> T {
        let mut memos = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(memos.entry(uid.to_string()).or_default())
    }

    pub(super) fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| keep(uid));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Drops the memo of every object the watch sees go, whoever deleted it (the controller is
/// never called for an object that is gone): on a delete event, and after a relist (which
/// follows a broken watch) for every object no longer listed.
pub(super) struct MemoJanitor {
    memos: Arc<Memos>,
    relisted: Option<HashSet<String>>,
}

impl MemoJanitor {
    pub(super) fn new(memos: Arc<Memos>) -> Self {
        Self {
            memos,
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
                    tracing::debug!(error = %e, "finalizer controller: memo watch failed; retrying")
                }
            }
        }
    }

    fn observe<K: kube::Resource>(&mut self, event: &watcher::Event<K>) {
        use watcher::Event;
        let uid = |m: &K| m.meta().uid.clone().unwrap_or_default();
        match event {
            Event::Delete(m) => self.memos.forget(&uid(m)),
            Event::Init => self.relisted = Some(HashSet::new()),
            Event::InitApply(m) => {
                if let Some(seen) = self.relisted.as_mut() {
                    seen.insert(uid(m));
                }
            }
            Event::InitDone => {
                if let Some(seen) = self.relisted.take() {
                    self.memos.retain(|uid| seen.contains(uid));
                }
            }
            Event::Apply(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mosc(uid: &str) -> MachineOSConfig {
        let mut m = MachineOSConfig::default();
        m.metadata.uid = Some(uid.into());
        m
    }

    #[test]
    fn memos_of_objects_deleted_by_anyone_are_dropped() {
        let memos = Arc::new(Memos::default());
        let mut janitor = MemoJanitor::new(Arc::clone(&memos));
        for uid in ["a", "b", "c"] {
            memos.with(uid, |m| m.attempts = 3);
        }
        // Deleted while watched (e.g. release-finalizers --force, or the finalizer removed by
        // hand: the controller is never called for it again).
        janitor.observe(&watcher::Event::Delete(mosc("a")));
        assert_eq!(memos.len(), 2);
        janitor.observe(&watcher::Event::Apply(mosc("b")));
        assert_eq!(memos.len(), 2, "an update keeps the memo");
        // Deleted while the watch was down: the relist no longer lists it.
        janitor.observe(&watcher::Event::<MachineOSConfig>::Init);
        janitor.observe(&watcher::Event::InitApply(mosc("b")));
        assert_eq!(
            memos.len(),
            2,
            "nothing dropped before the relist completes"
        );
        janitor.observe(&watcher::Event::<MachineOSConfig>::InitDone);
        assert_eq!(memos.len(), 1);
        assert_eq!(memos.with("b", |m| m.attempts), 3, "b's memo kept");
    }
}
