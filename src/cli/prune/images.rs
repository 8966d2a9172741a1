//! `prune`'s images, live: the repositories the MachineOSConfigs and MachineOSBuilds name
//! ([`crate::core::prune::images::sources`]), each listed and resolved with the push secret MCO
//! itself uses there, the ControllerConfig's CAs and the cluster proxy, then planned
//! ([`crate::core::prune::images::plan_images`]).
//!
//! Reads, as the admin: the ControllerConfig `machine-config-controller`, each push secret
//! named (in `openshift-machine-config-operator`), the Services and Routes of
//! `openshift-image-registry` (which hosts are the internal registry). Anything that cannot be
//! read leaves the repositories it concerns unlisted, with the reason; the builds' plan goes on.
//! A credential is never printed: the reasons pass through each session's redaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;

use crate::access::registry::Limits;
use crate::access::registry::cluster::{self, PullConfigError};
use crate::access::registry::session::Session;
use crate::access::registry::tags::TagReader;
use crate::core::prune::images::{ImagePlan, plan_images, sources};
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::{Listing, Source};
use crate::core::registry::node_config::PullConfig;
use crate::core::snapshot::Snapshot;

/// How prune reaches the registries of one run: a session per push secret (or why there is
/// none), and which hosts are the internal registry. Kept for `--apply --images`' re-reads and
/// deletes, so every request of a run uses the credentials its plan was made with.
pub(super) struct Registries {
    sessions: BTreeMap<String, Result<Arc<Session>, String>>,
    /// The internal registry's hosts, or why they could not be read.
    internal: Result<Vec<String>, String>,
}

impl Registries {
    /// The reader for `source`, or why its repository cannot be listed.
    pub(super) fn reader(&self, source: &Source) -> Result<TagReader, String> {
        let Some(secret) = &source.secret else {
            return Err(
                "no MachineOSConfig or MachineOSBuild names a push secret for it, so MCO could not \
                 reach it either"
                    .to_string(),
            );
        };
        match self.sessions.get(secret) {
            Some(Ok(session)) => Ok(TagReader::new(Arc::clone(session))),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("push secret {secret} was not read")),
        }
    }

    /// The session of `source`'s push secret (what `--apply --images` deletes with).
    pub(super) fn session(&self, source: &Source) -> Option<Arc<Session>> {
        let secret = source.secret.as_ref()?;
        self.sessions.get(secret)?.as_ref().ok().cloned()
    }

    pub(super) fn internal(&self, source: &Source) -> Internal {
        let known = self.internal.as_deref().map_err(String::as_str);
        Internal::of(&source.host, known)
    }

    /// Lists `source` now.
    pub(super) async fn listing(&self, source: &Source) -> Listing {
        let internal = self.internal(source);
        match self.reader(source) {
            Ok(reader) => reader.listing(source, internal).await,
            Err(why) => Listing {
                source: source.clone(),
                internal,
                tags: Err(why),
            },
        }
    }
}

/// The images plan for `snapshot` from the live cluster, how its registries were reached, and
/// notes for the report.
pub(super) async fn plan_live(
    client: &Client,
    snapshot: &Snapshot,
) -> (ImagePlan, Option<Registries>, Vec<String>) {
    let sources = sources(snapshot);
    if sources.is_empty() {
        return (ImagePlan::default(), None, Vec::new());
    }
    let spec = match cluster::controller_config(client).await {
        Ok(spec) => spec,
        Err(e @ PullConfigError::NoControllerConfig) => {
            return (
                ImagePlan::skipped(format!(
                    "{e}; MCO reaches its registries with the ControllerConfig's CAs, and without \
                     one neither MCO nor prune can"
                )),
                None,
                Vec::new(),
            );
        }
        Err(e) => return (ImagePlan::skipped(e.to_string()), None, Vec::new()),
    };
    let trust = match spec.trust() {
        Ok(t) => t,
        Err(e) => {
            return (
                ImagePlan::skipped(format!(
                    "ControllerConfig/{}: {e}",
                    cluster::CONTROLLER_CONFIG
                )),
                None,
                Vec::new(),
            );
        }
    };
    let mut notes = Vec::new();
    let internal = cluster::internal_registry_hosts(client)
        .await
        .map_err(|why| {
            notes.push(format!(
                "{why}: a tag on a host that may be OpenShift's internal registry is kept (only \
             *.openshift-image-registry.svc and a Route's generated host tell without the lists)"
            ));
            why.to_string()
        });
    let mut sessions = BTreeMap::new();
    for secret in sources.iter().filter_map(|s| s.secret.clone()) {
        if sessions.contains_key(&secret) {
            continue;
        }
        let session = match cluster::push_secret(client, &secret).await {
            Ok(auths) => Ok(Arc::new(Session::new(
                PullConfig {
                    auths,
                    trust: trust.clone(),
                    proxy: spec.proxy.clone().unwrap_or_default(),
                    // MCO's image pruner uses no mirrors: it asks the repository itself.
                    mirrors: Vec::new(),
                },
                Limits::default(),
            ))),
            Err(e) => Err(format!("its push secret cannot be used: {e}")),
        };
        sessions.insert(secret, session);
    }
    let registries = Registries { sessions, internal };
    let listings = futures::future::join_all(sources.iter().map(|s| registries.listing(s))).await;
    (plan_images(snapshot, &listings), Some(registries), notes)
}
