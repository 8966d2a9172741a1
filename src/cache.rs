//! Caches of the four kinds the policy reads, kept current by watches: kube's reflector for
//! the three MCO kinds (a handful of objects each, managedFields dropped) and the lean
//! [`NodeCache`] for nodes (name, labels, three annotations: BENCHMARKS.md has the figures).
//! A kind the cluster does not serve yet (CRD missing) is logged and retried with backoff; the
//! cache is not ready until every kind has completed one full list.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::live;
use crate::model::{MachineConfigPool, MachineOSBuild, MachineOSConfig, NodeMeta};
use crate::node_cache::NodeCache;
use crate::policy::PolicyMode;
use crate::snapshot::Snapshot;
use crate::view::{ClusterView, Fresh, FreshNodes};

/// Whether a watch is failing, and since when: a watch that has failed continuously for
/// `--stale-after` leaves its cache stale (the webhook is then not ready). Only the cache's
/// own data clears it (a completed list, an accepted watch): a probe that reaches the API
/// server again wakes the cache's driver (`reachable`) instead of waiting out its backoff.
#[derive(Default)]
pub(crate) struct WatchHealth {
    failing: Mutex<Option<Failing>>,
    probing: AtomicBool,
    reachable: Notify,
}

struct Failing {
    since: Instant,
    error: String,
    reported: bool,
    /// A probe already woke the driver in this streak: from then on its retries follow their
    /// backoff, so an API server that answers probes but fails the cache's own (possibly
    /// large) list is not asked for it every second.
    woken: bool,
}

impl WatchHealth {
    /// The watch delivered an event; returns how long it had been failing, if it was.
    pub(crate) fn succeeded(&self) -> Option<Duration> {
        let was = self.lock().take();
        was.map(|f| f.since.elapsed())
    }

    /// The watch failed at `now` with `error`; a failure streak keeps its start. Returns true
    /// the first time the streak reaches `stale_after` (to log it once).
    pub(crate) fn failed(&self, now: Instant, error: String, stale_after: Duration) -> bool {
        let mut failing = self.lock();
        let f = failing.get_or_insert_with(|| Failing {
            since: now,
            error: String::new(),
            reported: false,
            woken: false,
        });
        f.error = error;
        let newly_stale = !f.reported && now.saturating_duration_since(f.since) >= stale_after;
        f.reported |= newly_stale;
        newly_stale
    }

    /// How long the watch has been failing and its last error, once that is `stale_after` or
    /// longer at `now`.
    pub(crate) fn stale(&self, now: Instant, stale_after: Duration) -> Option<(Duration, String)> {
        let failing = self.lock();
        let f = failing.as_ref()?;
        let for_ = now.saturating_duration_since(f.since);
        (for_ >= stale_after).then(|| (for_, f.error.clone()))
    }

    pub(crate) fn is_failing(&self) -> bool {
        self.lock().is_some()
    }

    /// True if the watch is failing, no probe is running, and none woke the driver yet in this
    /// streak (the caller starts one).
    fn start_probe(&self) -> bool {
        if self.lock().as_ref().is_none_or(|f| f.woken) {
            return false;
        }
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// A probe got through: wakes the driver, once per failing streak.
    fn wake(&self) {
        if let Some(f) = self.lock().as_mut() {
            f.woken = true;
        }
        // Before the driver wakes, so a failure after the streak ends can start a new probe.
        self.probing.store(false, Ordering::Release);
        self.reachable.notify_one();
    }

    /// Sleeps for `delay`, or less if a probe finds the API server reachable meanwhile: a
    /// backoff grown during an outage (up to 30 s) would otherwise hold a cache stale that long
    /// after the outage ended.
    pub(crate) async fn back_off(&self, delay: Duration) {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = self.reachable.notified() => {}
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Failing>> {
        self.failing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How often a failing watch's resource is probed, and the bound of one probe.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Logs a recovery if the watch was failing.
pub(crate) fn recovered(health: &WatchHealth, what: &'static str, how: &'static str) {
    if let Some(failed_for) = health.succeeded() {
        tracing::info!(cache = what, failed_for = ?failed_for, how, "watch recovered");
    }
}

/// Starts a probe of a failing watch's resource unless one is running or one already woke
/// the driver in this failing streak: every second it tries `attempt` (what the watch needs: a
/// list and a watch, each small) until it works, then wakes the cache's driver
/// (`WatchHealth::reachable`) to list or watch again at once. The probe itself clears nothing:
/// a cache is healthy again only once its own list or watch succeeds, so `/readyz` does not
/// turn 200 while the data is still behind.
pub(crate) fn probe<F, Fut>(health: &Arc<WatchHealth>, what: &'static str, attempt: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send,
{
    if !health.start_probe() {
        return;
    }
    let health = Arc::clone(health);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            if !health.is_failing() {
                break;
            }
            match tokio::time::timeout(PROBE_TIMEOUT, attempt()).await {
                Ok(Ok(())) => {
                    tracing::info!(cache = what, "the API server answers again; retrying now");
                    health.wake();
                    return;
                }
                Ok(Err(e)) => tracing::debug!(cache = what, error = %e, "probe failed"),
                Err(_) => tracing::debug!(cache = what, "probe timed out"),
            }
        }
        health.probing.store(false, Ordering::Release);
    });
}

/// A list and a watch of `api`'s resource, one item and one second.
async fn list_and_watch<K>(api: Api<K>) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    api.list(&kube::api::ListParams::default().limit(1)).await?;
    let watch = api
        .watch(&kube::api::WatchParams::default().timeout(1), "0")
        .await?;
    drop(watch);
    Ok(())
}

/// One reflector store, whether its first list completed, and its watch's health.
struct Cached<K: Resource<DynamicType = ()> + Clone + 'static> {
    what: &'static str,
    store: Store<K>,
    ready: Arc<AtomicBool>,
    health: Arc<WatchHealth>,
}

impl<K> Cached<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` into a new store. Returns the store and the driving tasks.
    fn start(
        api: Api<K>,
        what: &'static str,
        stale_after: Duration,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let (store, mut writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let health = Arc::new(WatchHealth::default());
        let watch_health = Arc::clone(&health);
        let driver = tokio::spawn(async move {
            // Each pass is one watcher: a fresh one lists first, and the store swaps in the
            // list's result whole (`InitDone`). A probe that reaches the API server again ends
            // the pass, so the cache lists at once rather than after the watcher's backoff.
            loop {
                let stream = watcher(api.clone(), watcher::Config::default())
                    .default_backoff()
                    .modify(|o: &mut K| o.meta_mut().managed_fields = None);
                let mut stream = std::pin::pin!(stream);
                loop {
                    let item = tokio::select! {
                        item = stream.next() => item,
                        () = watch_health.reachable.notified() => break,
                    };
                    let Some(item) = item else { break };
                    match item {
                        Ok(event) => {
                            writer.apply_watcher_event(&event);
                            // The store holds current data again once a list is swapped in
                            // or a change arrives; `Init` and `InitApply` only fill the side
                            // buffer.
                            if !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
                            {
                                recovered(&watch_health, what, "the watch delivers again");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(cache = what, error = %e, "watch failed; retrying with backoff");
                            if watch_health.failed(Instant::now(), e.to_string(), stale_after) {
                                tracing::warn!(
                                    cache = what,
                                    stale_after = ?stale_after,
                                    "cache stale: its watch has been failing since; /readyz answers 503 until it recovers"
                                );
                            }
                            let api = api.clone();
                            probe(&watch_health, what, move || list_and_watch(api.clone()));
                        }
                    }
                }
            }
        });
        let (flag, reader) = (Arc::clone(&ready), store.clone());
        let readiness = tokio::spawn(async move {
            if reader.wait_until_ready().await.is_ok() {
                flag.store(true, Ordering::Release);
                tracing::info!(cache = what, objects = reader.len(), "cache synced");
            }
        });
        (
            Self {
                what,
                store,
                ready,
                health,
            },
            vec![driver, readiness],
        )
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn stale(&self, now: Instant, stale_after: Duration) -> Option<String> {
        describe_stale(self.what, &self.health, now, stale_after)
    }
}

/// "machineconfigpools (watch failing for 35s: ...)" when `health` is stale at `now`.
fn describe_stale(
    what: &str,
    health: &WatchHealth,
    now: Instant,
    stale_after: Duration,
) -> Option<String> {
    let (for_, error) = health.stale(now, stale_after)?;
    Some(format!(
        "{what} (watch failing for {}s: {error})",
        for_.as_secs()
    ))
}

/// The webhook's view of the cluster: three reflectors, the node cache (with its index of
/// nodes by image digest), and a client for fresh reads.
pub struct Caches {
    client: Client,
    configs: Cached<MachineOSConfig>,
    builds: Cached<MachineOSBuild>,
    pools: Cached<MachineConfigPool>,
    nodes: NodeCache,
    stale_after: Duration,
    fence_wait: Duration,
    tasks: Vec<JoinHandle<()>>,
}

/// How long a confirmation waits for the node cache to pass the fence before it also starts
/// listing every node (whichever finishes first answers). Node watch events arrive every few
/// milliseconds on a large cluster (kubelets and MCO update nodes); a quiet cluster gets no
/// event to pass the fence with, and is small enough for the list to be cheap.
pub const DEFAULT_FENCE_WAIT: Duration = Duration::from_millis(100);

impl Caches {
    /// Starts the watches; returns at once (see [`ClusterView::ready`]). A cache whose watch
    /// has failed continuously for `stale_after` makes the view not ready until it recovers.
    pub fn start(client: Client, stale_after: Duration) -> Self {
        let mut tasks = Vec::new();
        let (configs, t) = Cached::start(Api::all(client.clone()), "machineosconfigs", stale_after);
        tasks.extend(t);
        let (builds, t) = Cached::start(Api::all(client.clone()), "machineosbuilds", stale_after);
        tasks.extend(t);
        let (pools, t) = Cached::start(Api::all(client.clone()), "machineconfigpools", stale_after);
        tasks.extend(t);
        let nodes = NodeCache::start(client.clone(), stale_after);
        Self {
            client,
            configs,
            builds,
            pools,
            nodes,
            stale_after,
            fence_wait: DEFAULT_FENCE_WAIT,
            tasks,
        }
    }

    /// Sets how long a confirmation waits for the node cache before also listing nodes.
    pub fn with_fence_wait(mut self, wait: Duration) -> Self {
        self.fence_wait = wait;
        self
    }

    /// Everything a decision reads, at least as fresh as the moment this is called: builds,
    /// pools and MOSCs listed now, and nodes from the node cache once it has applied the node
    /// collection's current revision, or a list of every node if that is quicker. The lists and
    /// the fence run at once: a consistent list of a quiet collection waits for the API
    /// server's next progress notification from etcd (up to 100 ms), which the fence need not
    /// wait behind. A node list needs the fresh pools (it keeps only the labels their
    /// selectors read), so it starts once both the lists and `--fence-wait-ms` are done.
    async fn fresh_read(&self) -> Result<Fresh, String> {
        let objects = async {
            live::decision_objects(&self.client)
                .await
                .map_err(|e| e.to_string())
        };
        let fence = async {
            let revision = live::node_revision(&self.client)
                .await
                .map_err(|e| e.to_string())?;
            // Not an etcd revision: no fence to wait on.
            let Some(revision) = revision else {
                return Ok::<_, String>((None, false));
            };
            let passed = tokio::time::timeout(self.fence_wait, self.nodes.caught_up(revision))
                .await
                .is_ok();
            Ok((Some(revision), passed))
        };
        let (objects, fence) = tokio::join!(objects, fence);
        let (objects, (revision, passed)) = (objects?, fence?);
        let nodes = match revision {
            _ if passed => FreshNodes::Cached,
            None => self.listed_nodes(&objects.pools).await?,
            Some(revision) => {
                let fence = self.nodes.caught_up(revision);
                let mut fence = std::pin::pin!(fence);
                tokio::select! {
                    biased;
                    () = fence.as_mut() => FreshNodes::Cached,
                    listed = self.listed_nodes(&objects.pools) => match listed {
                        Ok(nodes) => nodes,
                        // The cache may still catch up within the caller's deadline.
                        Err(e) => {
                            tracing::debug!(error = %e, "listing nodes failed; waiting for the node cache");
                            fence.await;
                            FreshNodes::Cached
                        }
                    },
                }
            }
        };
        Ok(Fresh { objects, nodes })
    }

    async fn listed_nodes(&self, pools: &[Arc<MachineConfigPool>]) -> Result<FreshNodes, String> {
        let nodes = live::nodes_for(&self.client, pools)
            .await
            .map_err(|e| e.to_string())?;
        Ok(FreshNodes::Listed(nodes.unwrap_or_default()))
    }

    /// Each cache's "stale at `now`" description.
    fn stale_at(&self, now: Instant) -> [(&'static str, Option<String>); 4] {
        let after = self.stale_after;
        [
            (self.configs.what, self.configs.stale(now, after)),
            (self.builds.what, self.builds.stale(now, after)),
            (self.pools.what, self.pools.stale(now, after)),
            (
                "nodes",
                describe_stale("nodes", self.nodes.health(), now, after),
            ),
        ]
    }
}

impl Drop for Caches {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl ClusterView for Caches {
    fn objects(&self) -> Snapshot {
        Snapshot {
            machine_os_configs: self.configs.store.state(),
            machine_os_builds: self.builds.store.state(),
            pools: self.pools.store.state(),
            nodes: Vec::new(),
        }
    }

    fn nodes(&self, digests: Option<&BTreeSet<String>>, mode: PolicyMode) -> Vec<Arc<NodeMeta>> {
        self.nodes.nodes(digests, mode)
    }

    fn fresh(&self) -> BoxFuture<'_, Result<Fresh, String>> {
        Box::pin(self.fresh_read())
    }

    fn ready(&self) -> bool {
        self.configs.ready() && self.builds.ready() && self.pools.ready() && self.nodes.ready()
    }

    fn readiness(&self) -> Result<(), String> {
        if !self.ready() {
            let unsynced: Vec<&str> = [
                (self.configs.what, self.configs.ready()),
                (self.builds.what, self.builds.ready()),
                (self.pools.what, self.pools.ready()),
                ("nodes", self.nodes.ready()),
            ]
            .into_iter()
            .filter(|(_, ready)| !ready)
            .map(|(what, _)| what)
            .collect();
            return Err(format!(
                "caches have not finished their first full list: {}",
                unsynced.join(", ")
            ));
        }
        let stale: Vec<String> = self
            .stale_at(Instant::now())
            .into_iter()
            .filter_map(|(_, s)| s)
            .collect();
        if stale.is_empty() {
            Ok(())
        } else {
            Err(format!("stale caches: {}", stale.join("; ")))
        }
    }

    fn stale(&self) -> Vec<(&'static str, bool)> {
        self.stale_at(Instant::now())
            .into_iter()
            .map(|(what, s)| (what, s.is_some()))
            .collect()
    }

    fn sizes(&self) -> Vec<(&'static str, usize)> {
        let (nodes, with_images) = self.nodes.sizes();
        vec![
            ("machineosconfigs", self.configs.store.len()),
            ("machineosbuilds", self.builds.store.len()),
            ("machineconfigpools", self.pools.store.len()),
            ("nodes", nodes),
            ("nodes_with_images", with_images),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_stale_after_failing_continuously_and_recovers_on_its_own() {
        let health = WatchHealth::default();
        let after = Duration::from_secs(30);
        let t0 = Instant::now();
        assert_eq!(health.stale(t0, after), None, "healthy");
        assert!(!health.failed(t0, "403 forbidden".into(), after));
        assert!(!health.failed(t0 + Duration::from_secs(20), "403 again".into(), after));
        assert_eq!(health.stale(t0 + Duration::from_secs(29), after), None);
        // The streak keeps its start: stale 30 s after the first failure, with the last error.
        assert!(
            health.failed(t0 + Duration::from_secs(31), "403 still".into(), after),
            "reported once when it turns stale"
        );
        assert!(!health.failed(t0 + Duration::from_secs(40), "403 still".into(), after));
        let (for_, error) = health
            .stale(t0 + Duration::from_secs(41), after)
            .expect("stale");
        assert_eq!((for_.as_secs(), error.as_str()), (41, "403 still"));
        // One event from the watch again: healthy at once.
        assert!(health.succeeded().is_some());
        assert_eq!(health.stale(t0 + Duration::from_secs(42), after), None);
        assert!(health.succeeded().is_none());
        // A new streak starts from scratch.
        assert!(!health.failed(t0 + Duration::from_secs(50), "timeout".into(), after));
        assert_eq!(health.stale(t0 + Duration::from_secs(79), after), None);
        assert!(health.stale(t0 + Duration::from_secs(80), after).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_reaches_the_api_server_cuts_the_backoff_short_but_clears_nothing() {
        use std::sync::atomic::AtomicUsize;
        let health = Arc::new(WatchHealth::default());
        health.failed(
            Instant::now(),
            "connection refused".into(),
            Duration::from_secs(30),
        );
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&attempts);
        let attempt = move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(kube::Error::LinesCodecMaxLineLengthExceeded)
                } else {
                    Ok(())
                }
            }
        };
        probe(&health, "nodes", attempt.clone());
        probe(&health, "nodes", attempt);
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        let waited = started.elapsed();
        // Two failed probes and a good one, a second apart: woken after 3 s, not 30 s, and by
        // one probe only (the second call found it running).
        assert_eq!(waited, Duration::from_secs(3));
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert!(
            health.is_failing(),
            "only the cache's own list or watch clears it"
        );
        // Once per failing streak: a retry that fails again follows its backoff.
        probe(&health, "nodes", || async { Ok(()) });
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        // A new streak may be cut short again.
        assert!(health.succeeded().is_some());
        health.failed(
            Instant::now(),
            "connection refused".into(),
            Duration::from_secs(30),
        );
        probe(&health, "nodes", || async { Ok(()) });
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(30)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_probe_the_backoff_runs_its_course() {
        let health = WatchHealth::default();
        let started = tokio::time::Instant::now();
        health.back_off(Duration::from_secs(4)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }
}
