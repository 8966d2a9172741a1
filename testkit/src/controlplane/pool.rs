//! Control planes reused between the tests of one process. Starting etcd, kube-apiserver and
//! the garbage collector costs about 4 CPU-seconds, most of a short test; so
//! [`ControlPlane::start`] leases an idle one, reset to what a fresh one holds. A dropped one
//! becomes idle when its test's thread ends, once nothing of that test can still write to it.
//! The reset deletes every object the fresh control plane did not hold (webhooks and admission
//! policies first, so nothing refuses the rest; finalizers stripped, namespaces finalized, as
//! no namespace controller runs), waits until they are gone and writes the ClusterVersion
//! afresh. A control plane the test changed beyond that (a kept object edited or deleted, a
//! server restarted, a CRD removed) is stopped instead, and the lease starts a fresh one. The
//! idle ones stop when the process exits.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Discovery, verbs};
use serde_json::json;
use tokio::sync::Notify;

use super::{ControlPlane, DEFAULT_RELEASE, Servers, client_from_kubeconfig};
use crate::{Result, clusterversion};

static IDLE: Mutex<Vec<Servers>> = Mutex::new(Vec::new());
/// How many control planes wait in an ending thread's handover, and the signal they arrived.
static HANDED: AtomicUsize = AtomicUsize::new(0);
static IDLE_AGAIN: Notify = Notify::const_new();

/// Kinds whose kept objects the API server itself rewrites as it runs: a changed
/// resourceVersion there is not the test's doing.
const CHURNS: &[&str] = &[
    "leases",
    "endpoints",
    "endpointslices",
    "apiservices",
    "flowschemas",
    "prioritylevelconfigurations",
];

/// What a fresh control plane serves and holds: every listable kind, and every object but the
/// ClusterVersion (which the reset writes afresh), by UID, with its kind and resourceVersion.
#[derive(Default)]
pub(super) struct Baseline {
    kinds: Vec<ApiResource>,
    objects: HashMap<String, (String, String)>,
}

impl Baseline {
    pub(super) async fn capture(client: &kube::Client) -> Result<Self> {
        let discovery = Discovery::new(client.clone()).run().await?;
        let kinds: Vec<ApiResource> = discovery
            .groups()
            .flat_map(|group| group.recommended_resources())
            .filter(|(_, caps)| {
                caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::DELETE)
            })
            .map(|(ar, _)| ar)
            .collect();
        let mut objects = HashMap::new();
        for ar in &kinds {
            if ar.kind == "ClusterVersion" {
                continue;
            }
            for object in list(client, ar).await? {
                if let (Some(uid), Some(version)) =
                    (object.metadata.uid, object.metadata.resource_version)
                {
                    objects.insert(uid, (ar.plural.clone(), version));
                }
            }
        }
        Ok(Self { kinds, objects })
    }

    fn kept(&self, object: &DynamicObject) -> bool {
        object
            .metadata
            .uid
            .as_ref()
            .is_some_and(|uid| self.objects.contains_key(uid))
    }
}

/// An idle control plane of this process, reset, or `None` if there is none to reuse. One a
/// test just dropped, whose thread has not yet ended, is waited for (at most 2 s).
pub(super) async fn lease() -> Option<ControlPlane> {
    loop {
        let next = lock().pop();
        let servers = match next {
            Some(servers) => servers,
            None if HANDED.load(Ordering::SeqCst) > 0 => {
                let arrived = IDLE_AGAIN.notified();
                if lock().is_empty() {
                    tokio::time::timeout(Duration::from_secs(2), arrived)
                        .await
                        .ok()?;
                }
                continue;
            }
            None => return None,
        };
        match reset(&servers).await {
            Ok(client) => {
                tracing::info!("control plane: reusing the one at {}", servers.server);
                return Some(ControlPlane {
                    servers: Some(servers),
                    client,
                    reusable: true.into(),
                });
            }
            Err(e) => {
                tracing::info!("control plane: stopping the one at {}: {e}", servers.server);
            }
        }
    }
}

/// Keeps `servers` for the next lease once the calling thread ends: a test's thread ends after
/// its runtime stopped every task and its other locals (guards, CLI runs) were dropped, so
/// nothing of the test still writes when the next one resets it. On the main thread (a kit
/// program, not a test) it stops at once.
pub(super) fn give_back(servers: Servers) {
    if std::thread::current().name() == Some("main") {
        return;
    }
    // Past the thread's own end (its locals already destroyed) it stops at once too.
    let _ = HANDOVER.try_with(move |handover| {
        HANDED.fetch_add(1, Ordering::SeqCst);
        handover.0.borrow_mut().push(servers);
    });
}

struct Handover(RefCell<Vec<Servers>>);

thread_local! {
    static HANDOVER: Handover = const { Handover(RefCell::new(Vec::new())) };
}

impl Drop for Handover {
    fn drop(&mut self) {
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain function with no arguments; it only runs at process exit.
            unsafe {
                libc::atexit(stop_idle);
            }
        });
        let handed = self.0.get_mut();
        let count = handed.len();
        lock().append(handed);
        HANDED.fetch_sub(count, Ordering::SeqCst);
        IDLE_AGAIN.notify_waiters();
    }
}

extern "C" fn stop_idle() {
    let idle = std::mem::take(&mut *lock());
    drop(idle);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Servers>> {
    IDLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Brings `servers` back to its baseline; returns a client of the calling test's runtime.
async fn reset(servers: &Servers) -> Result<kube::Client> {
    crate::probe::ready(
        &crate::tls::https_client(&servers.pki.ca_pem())?,
        &format!("{}/readyz", servers.server),
    )
    .await?;
    let client = client_from_kubeconfig(&servers.kubeconfig).await?;
    let baseline = &servers.baseline;
    // Webhooks and admission policies first (their server is gone, and they may refuse the
    // deletions below), namespaces last (their objects first).
    let order = |ar: &&ApiResource| match (ar.group.as_str(), ar.plural.as_str()) {
        ("admissionregistration.k8s.io", _) => 0,
        ("", "namespaces") => 2,
        _ => 1,
    };
    let mut kinds: Vec<&ApiResource> = baseline.kinds.iter().collect();
    kinds.sort_by_key(order);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = Vec::new();
        for ar in &kinds {
            for object in list(&client, ar).await? {
                if baseline.kept(&object) {
                    continue;
                }
                let name = object.metadata.name.clone().unwrap_or_default();
                // An API server may still call a webhook just deleted: tried again next pass.
                match remove(&client, ar, &object).await {
                    Ok(()) => left.push(format!("{} {name}", ar.plural)),
                    Err(e) => left.push(format!("{} {name} ({e})", ar.plural)),
                }
            }
        }
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("still there after 10 s: {}", left.join(", ")).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut found = HashSet::new();
    for ar in &kinds {
        for object in list(&client, ar).await? {
            let (Some(uid), Some(version)) =
                (&object.metadata.uid, &object.metadata.resource_version)
            else {
                continue;
            };
            let Some((_, kept)) = baseline.objects.get(uid) else {
                continue;
            };
            found.insert(uid.clone());
            if kept != version && !CHURNS.contains(&ar.plural.as_str()) {
                let name = object.metadata.name.unwrap_or_default();
                return Err(format!("the test changed {} {name}", ar.plural).into());
            }
        }
    }
    if found.len() < baseline.objects.len() {
        let gone = baseline.objects.len() - found.len();
        return Err(format!("the test deleted {gone} objects a fresh control plane holds").into());
    }
    // kubectl's discovery cache may hold what a test's own CRD served.
    match std::fs::remove_dir_all(servers.dir.path().join("kubectl-cache")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    clusterversion::set_release(&client, DEFAULT_RELEASE).await?;
    Ok(client)
}

/// Deletes `object` at once: finalizers stripped (but a CRD's, whose controller removes its
/// objects), no grace period, dependents left to the garbage collector; a namespace finalized.
async fn remove(client: &kube::Client, ar: &ApiResource, object: &DynamicObject) -> Result<()> {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let api: Api<DynamicObject> = match &object.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let finalizers = object
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| !f.is_empty());
    if finalizers && ar.kind != "CustomResourceDefinition" {
        let strip = json!({"metadata": {"finalizers": null}});
        ignore_gone(
            api.patch(name, &PatchParams::default(), &Patch::Merge(&strip))
                .await,
        )?;
    }
    if object.metadata.deletion_timestamp.is_none() {
        let params = DeleteParams::background().grace_period(0);
        ignore_gone(api.delete(name, &params).await.map(|_| ()))?;
    }
    if ar.kind == "Namespace" {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let finalized = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name}, "spec": {"finalizers": []}});
        let pp = PostParams::default();
        ignore_gone(
            namespaces
                .replace_subresource("finalize", name, &pp, &finalized)
                .await
                .map(|_| ()),
        )?;
    }
    Ok(())
}

fn ignore_gone<T>(result: kube::Result<T>) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn list(client: &kube::Client, ar: &ApiResource) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    Ok(api.list(&ListParams::default()).await?.items)
}
