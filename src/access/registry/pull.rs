//! The one door to what a node pulls with: the ControllerConfig `machine-config-controller`'s
//! credentials, CAs and proxy and the mirror sets, read from the live cluster ([`pull_config`])
//! or from a dump, whose credentials come only from `--authfile` ([`dump_pull_config`]). Every
//! way it can fail is one [`PullConfigError`], and [`PullConfigError::unknown`] is the answer
//! an image gets while it lasts: unknown, never missing. A cluster without the mirror kinds
//! (not OpenShift) has no mirrors; one without the ControllerConfig is an error, since every
//! answer would be about another pull than the node's. The guard's RBAC allows exactly these
//! reads (`manifests/base/rbac.yaml`).

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::http::chain;
use crate::access::dump::Loaded;
use crate::core::registry::Answer;
use crate::core::registry::auth::AuthFile;
use crate::core::registry::node_config::{ControllerConfigSpec, NodeConfigError, PullConfig};
use crate::core::registry::sources::{MirrorRule, merge};

/// The ControllerConfig MCO keeps.
pub const CONTROLLER_CONFIG: &str = "machine-config-controller";

/// Why the pull configuration cannot be had (never quoting a credential).
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
    /// A dump's ControllerConfig or mirror sets cannot be used.
    #[error("{}: {reason}", dir.display())]
    Dump { dir: PathBuf, reason: String },
    /// `--authfile FILE` cannot be read, or holds no credentials.
    #[error("{0}")]
    Authfile(String),
}

impl PullConfigError {
    /// What the registry's answer is for any image while the pull configuration cannot be had.
    pub fn unknown(&self) -> Answer {
        Answer::unknown(format!("cannot read how nodes pull: {self}"))
    }
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

/// A ControllerConfig object's spec, live or from a dump.
fn spec_of(object: &Value) -> Result<ControllerConfigSpec, serde_json::Error> {
    serde_json::from_value(object.get("spec").cloned().unwrap_or(Value::Null))
}

/// The live ControllerConfig's spec: what it says of credentials, CAs and the proxy.
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
        Err(e) => return Err(PullConfigError::ControllerConfig(chain(&e))),
    };
    spec_of(&cc.data)
        .map_err(|e| PullConfigError::ControllerConfig(format!("spec does not decode: {e}")))
}

/// Reads the node's pull configuration from the live cluster.
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
                    reason: chain(&e),
                });
            }
        }
    }
    from_objects(&spec, objects.iter().map(|(k, v)| (*k, v)))
}

/// What a dump tells of a node's pull.
pub struct DumpPull {
    /// The ControllerConfig's CAs and proxy (none without one), the dump's mirror sets and
    /// `--authfile`'s credentials (none without it), or why they cannot be used.
    pub config: Result<PullConfig, PullConfigError>,
    /// Whether the dump holds a ControllerConfig (without one the node's CAs and proxy are
    /// not known).
    pub controller_config: bool,
    /// Whether `--authfile` was given (a dump holds no credentials).
    pub authfile: bool,
}

/// What a node pulls with, from a dump read from `dir`: its ControllerConfig (its pull secret
/// never read) and mirror sets, and the credentials of `authfile`.
pub fn dump_pull_config(
    loaded: &Loaded,
    dir: &Path,
    authfile: Option<&Path>,
) -> Result<DumpPull, PullConfigError> {
    let dump_error = |reason: String| PullConfigError::Dump {
        dir: dir.to_path_buf(),
        reason,
    };
    let object = loaded
        .pull
        .iter()
        .find(|(kind, _)| kind == "ControllerConfig")
        .map(|(_, object)| object);
    let mut spec = match object {
        Some(object) => spec_of(object)
            .map_err(|e| dump_error(format!("the ControllerConfig does not decode: {e}")))?,
        None => ControllerConfigSpec::default(),
    };
    spec.internal_registry_pull_secret = None;
    let auths = authfile.map(read_authfile).transpose()?;
    let config = from_objects(&spec, loaded.pull.iter().map(|(k, v)| (k.as_str(), v)))
        .map(|pull| PullConfig {
            auths: auths.unwrap_or_default(),
            ..pull
        })
        .map_err(|e| dump_error(e.to_string()));
    Ok(DumpPull {
        config,
        controller_config: object.is_some(),
        authfile: authfile.is_some(),
    })
}

/// The credentials of `--authfile FILE` (the containers/docker `auths` format).
fn read_authfile(path: &Path) -> Result<AuthFile, PullConfigError> {
    let raw = std::fs::read(path).map_err(|e| {
        PullConfigError::Authfile(format!("reading --authfile {}: {e}", path.display()))
    })?;
    AuthFile::parse(&raw)
        .map_err(|e| PullConfigError::Authfile(format!("--authfile {}: {e}", path.display())))
}

/// The pull configuration from a ControllerConfig's spec and mirror-set objects (`(kind,
/// object)`), live or from a dump.
fn from_objects<'a>(
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
fn mirror_rules<'a>(objects: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Vec<MirrorRule> {
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
mod tests;
