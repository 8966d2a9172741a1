//! When a simulator loop has something to do: a loop whose pass wrote nothing and that waits
//! on no timer of its own sleeps until the API server shows a change (watches on the kinds the
//! loops read), a test switches a knob, or [`IDLE_POLL`] passes (for what no watch sees: the
//! registry). A busy loop passes every poll interval, as MCO's queues would act on its work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{machine_api, mco};

/// The longest an idle loop sleeps without a change.
pub(super) const IDLE_POLL: Duration = Duration::from_secs(1);

/// The simulator's writes and the changes it was told of, shared by every loop.
#[derive(Clone)]
pub(super) struct Activity {
    writes: Arc<AtomicU64>,
    changes: Arc<watch::Sender<u64>>,
}

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            writes: Arc::new(AtomicU64::new(0)),
            changes: Arc::new(watch::Sender::new(0)),
        }
    }

    /// A loop sent a write request (accepted or not).
    pub(super) fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Write requests sent so far.
    pub(super) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Something a loop reads changed: the API server's objects or a test's knob.
    pub(super) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Where the world stands as the loops see it: changes told and writes sent so far. Two
    /// equal generations mean nothing a loop reads changed in between, save what a watch has
    /// not told yet.
    pub(super) fn generation(&self) -> (u64, u64) {
        (*self.changes.borrow(), self.writes())
    }

    /// A receiver that sees every change from now on.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Watches (metadata only) every kind the loops read, each change a [`Activity::changed`].
    /// A kind the API server does not serve (no Machine CRD) is retried with back-off, waking
    /// nobody.
    pub(super) fn watch(&self, client: &kube::Client) -> Vec<JoinHandle<()>> {
        let custom = |ar: ApiResource| {
            self.watch_kind(Api::<PartialObjectMeta<DynamicObject>>::all_with(
                client.clone(),
                &ar,
            ))
        };
        vec![
            self.watch_kind(Api::<PartialObjectMeta<Node>>::all(client.clone())),
            self.watch_kind(Api::<PartialObjectMeta<Job>>::namespaced(
                client.clone(),
                mco::MOB_NAMESPACE,
            )),
            custom(mco::mcp_resource()),
            custom(mco::mc_resource()),
            custom(mco::mosc_resource()),
            custom(mco::mosb_resource()),
            custom(machine_api::machine_resource()),
        ]
    }

    fn watch_kind<K>(&self, api: Api<PartialObjectMeta<K>>) -> JoinHandle<()>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    {
        let activity = self.clone();
        tokio::spawn(async move {
            let events = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                if event.is_ok() {
                    activity.changed();
                }
            }
        })
    }
}
