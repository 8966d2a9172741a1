//! What `prune` reaches a repository with, read as the admin, as MCO does: the push secret a
//! MachineOSConfig or MachineOSBuild names, in `openshift-machine-config-operator`, with the
//! ControllerConfig's CAs and proxy and no mirrors (MCO's image pruner asks the repository
//! itself); and which hosts are OpenShift's internal registry (its Services and Routes). One
//! [`Registries`] per run: every read, re-read and delete of a run uses the credentials its
//! plan was made with. `serve` never reads these. A credential is never printed: reasons pass
//! through each session's redaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::Limits;
use super::http::chain;
use super::pull::{PullConfigError, controller_config};
use super::session::Session;
use super::tags::TagReader;
use crate::core::registry::auth::AuthFile;
use crate::core::registry::internal::{self, Internal};
use crate::core::registry::listing::{Listing, PushRepository};
use crate::core::registry::node_config::PullConfig;

/// How prune reaches the registries of one run: a session per push secret (or why there is
/// none), and which hosts are the internal registry.
pub struct Registries {
    sessions: BTreeMap<String, Result<Arc<Session>, String>>,
    /// The internal registry's hosts, or why they could not be read.
    internal: Result<Vec<String>, String>,
}

impl Registries {
    /// Reads the ControllerConfig, the internal registry's hosts and the push secret of each
    /// of `sources`. Without a usable ControllerConfig no repository can be reached (MCO's
    /// CAs and proxy are its); a push secret or host list that cannot be read leaves only the
    /// repositories it concerns unreached, with the reason.
    pub async fn read(
        client: &kube::Client,
        sources: &[PushRepository],
    ) -> Result<Self, PullConfigError> {
        let spec = controller_config(client).await?;
        let trust = spec.trust()?;
        let internal = internal_registry_hosts(client).await;
        let mut sessions = BTreeMap::new();
        for secret in sources.iter().filter_map(|s| s.secret.clone()) {
            if sessions.contains_key(&secret) {
                continue;
            }
            let session = match push_secret(client, &secret).await {
                Ok(auths) => Ok(Arc::new(Session::new(
                    PullConfig {
                        auths,
                        trust: trust.clone(),
                        proxy: spec.proxy.clone().unwrap_or_default(),
                        mirrors: Vec::new(),
                    },
                    Limits::default(),
                ))),
                Err(e) => Err(format!("its push secret cannot be used: {e}")),
            };
            sessions.insert(secret, session);
        }
        Ok(Registries { sessions, internal })
    }

    /// Why the internal registry's hosts could not be read, if they could not.
    pub fn internal_unknown(&self) -> Option<&str> {
        self.internal.as_ref().err().map(String::as_str)
    }

    /// The reader for `source`, or why its repository cannot be listed.
    fn reader(&self, source: &PushRepository) -> Result<TagReader, String> {
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
    pub fn session(&self, source: &PushRepository) -> Option<Arc<Session>> {
        let secret = source.secret.as_ref()?;
        self.sessions.get(secret)?.as_ref().ok().cloned()
    }

    pub async fn listing(&self, source: &PushRepository) -> Listing {
        let known = self.internal.as_deref().map_err(String::as_str);
        let internal = Internal::of(&source.host, known);
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

/// The namespace MCO keeps push secrets in.
const MCO_NAMESPACE: &str = "openshift-machine-config-operator";

/// The credentials of push secret `name` in `openshift-machine-config-operator`, as MCO reads
/// them (`secrets.NewImageRegistrySecret`: `.dockerconfigjson` or `.dockercfg`), or why it
/// cannot be used (never quoting its content). Read when it is used, never kept beyond the run
/// or printed.
async fn push_secret(client: &kube::Client, name: &str) -> Result<AuthFile, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(format!("Secret {MCO_NAMESPACE}/{name} does not exist")),
        Err(e) => {
            return Err(format!(
                "reading Secret {MCO_NAMESPACE}/{name}: {}",
                chain(&e)
            ));
        }
    };
    let data = secret.data.unwrap_or_default();
    let raw = data
        .get(".dockerconfigjson")
        .or_else(|| data.get(".dockercfg"));
    let parsed = match raw {
        Some(raw) => AuthFile::parse(&raw.0).map_err(|e| e.to_string()),
        None => Err("no such key".to_string()),
    };
    parsed.map_err(|reason| {
        format!(
            "Secret {MCO_NAMESPACE}/{name} holds neither .dockerconfigjson nor .dockercfg \
             credentials: {reason}"
        )
    })
}

/// The hosts OpenShift's internal registry answers on, as MCO finds them: its Services and
/// Routes in `openshift-image-registry` (a cluster without the Route API has none of those).
async fn internal_registry_hosts(client: &kube::Client) -> Result<Vec<String>, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), internal::NAMESPACE);
    let mut hosts: Vec<String> = services
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing Services in {}: {}", internal::NAMESPACE, chain(&e)))?
        .items
        .into_iter()
        .map(|s| {
            let port = s
                .spec
                .and_then(|spec| spec.ports)
                .and_then(|ports| ports.first().map(|p| p.port));
            internal::service_host(s.metadata.name.as_deref().unwrap_or_default(), port)
        })
        .collect();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    );
    let routes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), internal::NAMESPACE, &resource);
    match routes.list(&ListParams::default()).await {
        Ok(list) => hosts.extend(list.items.iter().filter_map(|r| {
            r.data
                .get("spec")
                .and_then(|s| s.get("host"))
                .and_then(Value::as_str)
                .filter(|h| !h.is_empty())
                .map(str::to_string)
        })),
        // The Route API is not served (not OpenShift): no Routes.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(format!(
                "listing Routes in {}: {}",
                internal::NAMESPACE,
                chain(&e)
            ));
        }
    }
    Ok(hosts)
}
