//! What a node pulls with, read from the live cluster: the ControllerConfig
//! `machine-config-controller` (credentials, CAs, proxy; read by name, the only one MCO keeps),
//! every ImageDigestMirrorSet and ImageContentSourcePolicy (mirrors). The guard's RBAC allows
//! exactly these reads (`manifests/base/rbac.yaml`).
//!
//! And what `prune` reads as the admin to reach a repository as MCO does: a push secret in
//! `openshift-machine-config-operator` ([`push_secret`]), and which hosts are OpenShift's
//! internal registry ([`internal_registry_hosts`]). `serve` never calls these.
//!
//! A cluster without the mirror kinds (not OpenShift) has no mirrors; a cluster without the
//! ControllerConfig is an error, since without the node's credentials and CAs every answer
//! would be about another pull than the node's.

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::core::registry::auth::AuthFile;
use crate::core::registry::internal;

use crate::core::registry::node_config::{ControllerConfigSpec, NodeConfigError, PullConfig};
use crate::core::registry::sources::{MirrorRule, merge};

/// The ControllerConfig MCO keeps.
pub const CONTROLLER_CONFIG: &str = "machine-config-controller";

#[derive(Debug, thiserror::Error)]
pub enum PullConfigError {
    /// The cluster has no ControllerConfig `machine-config-controller` (or does not serve the
    /// kind): not an OpenShift cluster MCO manages.
    #[error(
        "the cluster has no ControllerConfig/{CONTROLLER_CONFIG}: it does not look like an OpenShift cluster MCO manages"
    )]
    NoControllerConfig,
    #[error(
        "reading ControllerConfig/{CONTROLLER_CONFIG} (the node's pull secret, CAs and proxy): {0}"
    )]
    ControllerConfig(String),
    #[error("ControllerConfig/{CONTROLLER_CONFIG}: {0}")]
    Decode(#[from] NodeConfigError),
    #[error("listing {kind}: {reason}")]
    Mirrors { kind: &'static str, reason: String },
}

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::all_with(client.clone(), &resource)
}

/// The ControllerConfig's spec: what it says of credentials, CAs and the proxy.
pub async fn controller_config(
    client: &kube::Client,
) -> Result<ControllerConfigSpec, PullConfigError> {
    let controller_configs = api(
        client,
        "machineconfiguration.openshift.io",
        "v1",
        "ControllerConfig",
        "controllerconfigs",
    );
    let cc = match controller_configs.get(CONTROLLER_CONFIG).await {
        Ok(cc) => cc,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Err(PullConfigError::NoControllerConfig);
        }
        Err(e) => {
            return Err(PullConfigError::ControllerConfig(
                crate::access::registry::http::chain(&e),
            ));
        }
    };
    serde_json::from_value(cc.data.get("spec").cloned().unwrap_or(Value::Null))
        .map_err(|e| PullConfigError::ControllerConfig(format!("spec does not decode: {e}")))
}

/// Reads the node's pull configuration from the cluster.
pub async fn pull_config(client: &kube::Client) -> Result<PullConfig, PullConfigError> {
    let spec = controller_config(client).await?;
    let mut objects = Vec::new();
    for (group, version, kind, plural) in [
        (
            "config.openshift.io",
            "v1",
            "ImageDigestMirrorSet",
            "imagedigestmirrorsets",
        ),
        (
            "operator.openshift.io",
            "v1alpha1",
            "ImageContentSourcePolicy",
            "imagecontentsourcepolicies",
        ),
    ] {
        match api(client, group, version, kind, plural)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => objects.extend(list.items.into_iter().map(|o| (kind, o.data))),
            // Not served (not OpenShift, or the kind was removed): no mirrors of that kind.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(PullConfigError::Mirrors {
                    kind,
                    reason: crate::access::registry::http::chain(&e),
                });
            }
        }
    }
    from_objects(&spec, objects.iter().map(|(k, v)| (*k, v)))
}

/// Why a push secret cannot be used (never quoting its content).
#[derive(Debug, thiserror::Error)]
pub enum PushSecretError {
    #[error("Secret {namespace}/{name} does not exist")]
    Missing {
        namespace: &'static str,
        name: String,
    },
    #[error("reading Secret {namespace}/{name}: {reason}")]
    Read {
        namespace: &'static str,
        name: String,
        reason: String,
    },
    #[error(
        "Secret {namespace}/{name} holds neither .dockerconfigjson nor .dockercfg credentials: {reason}"
    )]
    Decode {
        namespace: &'static str,
        name: String,
        reason: String,
    },
}

/// The namespace MCO keeps push secrets in.
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";

/// The credentials of push secret `name` in `openshift-machine-config-operator`, as MCO reads
/// them (`secrets.NewImageRegistrySecret`: `.dockerconfigjson` or `.dockercfg`). Read when it
/// is used, never kept beyond the run or printed.
pub async fn push_secret(client: &kube::Client, name: &str) -> Result<AuthFile, PushSecretError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(PushSecretError::Missing {
                namespace: MCO_NAMESPACE,
                name: name.to_string(),
            });
        }
        Err(e) => {
            return Err(PushSecretError::Read {
                namespace: MCO_NAMESPACE,
                name: name.to_string(),
                reason: crate::access::registry::http::chain(&e),
            });
        }
    };
    let data = secret.data.unwrap_or_default();
    let raw = data
        .get(".dockerconfigjson")
        .or_else(|| data.get(".dockercfg"))
        .ok_or_else(|| PushSecretError::Decode {
            namespace: MCO_NAMESPACE,
            name: name.to_string(),
            reason: "no such key".to_string(),
        })?;
    AuthFile::parse(&raw.0).map_err(|e| PushSecretError::Decode {
        namespace: MCO_NAMESPACE,
        name: name.to_string(),
        reason: e.to_string(),
    })
}

/// The hosts OpenShift's internal registry answers on, as MCO finds them: its Services and
/// Routes in `openshift-image-registry` (a cluster without the Route API has none of those).
pub async fn internal_registry_hosts(client: &kube::Client) -> Result<Vec<String>, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), internal::NAMESPACE);
    let mut hosts: Vec<String> = services
        .list(&ListParams::default())
        .await
        .map_err(|e| {
            format!(
                "listing Services in {}: {}",
                internal::NAMESPACE,
                crate::access::registry::http::chain(&e)
            )
        })?
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
                crate::access::registry::http::chain(&e)
            ));
        }
    }
    Ok(hosts)
}

/// The pull configuration from a ControllerConfig's spec and mirror-set objects (`(kind,
/// object)`), live or from a dump.
pub fn from_objects<'a>(
    spec: &ControllerConfigSpec,
    mirror_sets: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Result<PullConfig, PullConfigError> {
    Ok(PullConfig {
        auths: spec.pull_secret()?,
        trust: spec.trust()?,
        proxy: spec.proxy.clone().unwrap_or_default(),
        mirrors: mirror_rules(mirror_sets),
    })
}

/// The rules of ImageDigestMirrorSets (`spec.imageDigestMirrors`) and
/// ImageContentSourcePolicies (`spec.repositoryDigestMirrors`), merged.
pub fn mirror_rules<'a>(
    objects: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Vec<MirrorRule> {
    let mut rules = Vec::new();
    for (kind, object) in objects {
        let field = match kind {
            "ImageDigestMirrorSet" => "imageDigestMirrors",
            "ImageContentSourcePolicy" => "repositoryDigestMirrors",
            _ => continue,
        };
        let Some(entries) = object
            .get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for e in entries {
            let Some(source) = e.get("source").and_then(Value::as_str) else {
                continue;
            };
            let mirrors = e
                .get("mirrors")
                .and_then(Value::as_array)
                .map(|m| {
                    m.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let never =
                e.get("mirrorSourcePolicy").and_then(Value::as_str) == Some("NeverContactSource");
            rules.push(MirrorRule {
                source: source.to_string(),
                mirrors,
                never_contact_source: never,
            });
        }
    }
    merge(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_kinds_merge() {
        let idms = json!({"spec": {"imageDigestMirrors": [
            {"source": "quay.example/ocb", "mirrors": ["m1.example/ocb"], "mirrorSourcePolicy": "NeverContactSource"}
        ]}});
        let icsp = json!({"spec": {"repositoryDigestMirrors": [
            {"source": "quay.example/ocb", "mirrors": ["m2.example/ocb"]},
            {"source": "other.example", "mirrors": []}
        ]}});
        let rules = mirror_rules([
            ("ImageDigestMirrorSet", &idms),
            ("ImageContentSourcePolicy", &icsp),
        ]);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].mirrors, vec!["m1.example/ocb", "m2.example/ocb"]);
        assert!(rules[0].never_contact_source);
        assert!(rules[1].mirrors.is_empty());
    }
}
