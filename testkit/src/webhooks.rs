//! Registering the guard as the cluster's webhook: the product's own configurations
//! (rendered from `manifests/`) pointed at a guard process or at whatever stands in front of it,
//! applied, and waited for until the API server calls webhooks from them.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

use crate::Result;
use crate::controlplane::{ControlPlane, FIELD_MANAGER};
use crate::guard::{Guard, client_config};
use crate::manifests;

/// The product's ValidatingWebhookConfiguration (rendered from `manifests/base`) with each
/// webhook's clientConfig calling `url_base` + `/validate` and trusting `ca_pem`.
pub fn webhook_configuration(
    url_base: &str,
    ca_pem: &str,
) -> Result<ValidatingWebhookConfiguration> {
    let mut config = manifests::validating_webhook_configuration()?;
    point_each(&mut config.webhooks, |w| {
        w.client_config = client_config(url_base, "/validate", ca_pem)
    })?;
    Ok(config)
}

/// The product's MutatingWebhookConfiguration (rendered from `manifests/overlays/defer`)
/// pointed at the guard's /mutate.
pub fn mutating_webhook_configuration(guard: &Guard) -> Result<MutatingWebhookConfiguration> {
    let mut config = manifests::mutating_webhook_configuration()?;
    point_each(&mut config.webhooks, |w| {
        w.client_config = guard.client_config("/mutate")
    })?;
    Ok(config)
}

/// Applies `point` to every webhook of a rendered configuration (which must have some).
fn point_each<W>(webhooks: &mut Option<Vec<W>>, point: impl FnMut(&mut W)) -> Result<()> {
    webhooks
        .as_mut()
        .filter(|w| !w.is_empty())
        .ok_or("the rendered configuration has no webhooks")?
        .iter_mut()
        .for_each(point);
    Ok(())
}

/// Applies [`webhook_configuration`] (server-side apply) and waits until the API server calls
/// webhooks from it.
///
/// How "active" is established, independently of the guard's decisions: the API server loads
/// each kind of webhook configuration through one informer, which sees objects in
/// resourceVersion order. After ours is applied, a probe configuration of the same kind is
/// created (so it has a later resourceVersion) whose only webhook matches server-side dry-run
/// creates of Namespaces carrying a unique probe label and points at a closed port with
/// failurePolicy Fail. Once such a dry-run create is rejected by that webhook, the API server's
/// webhook set includes the probe and therefore ours. The probe is then deleted; while its
/// removal propagates it can only affect Namespaces carrying the probe label.
pub async fn register_validating_webhook(cp: &ControlPlane, guard: &Guard) -> Result<()> {
    register_validating_webhook_at(cp, &guard.base_url(), guard.ca_pem()).await
}

/// Like [`register_validating_webhook`], with every webhook calling `url_base` + `/validate`
/// (e.g. a forwarder standing in for the Service in front of a guard) and trusting `ca_pem`.
pub async fn register_validating_webhook_at(
    cp: &ControlPlane,
    url_base: &str,
    ca_pem: &str,
) -> Result<()> {
    let config = webhook_configuration(url_base, ca_pem)?;
    register(cp, url_base, &config, PROBE_VALIDATING).await
}

/// Like [`register_validating_webhook`], but as an OLM bundle installs the guard: OLM's
/// `webhookdefinitions` cannot carry `matchConditions`, so there is only the enforcing webhook,
/// without the condition that keeps MCO's own requests away, and the guard must admit them
/// itself (`serve --mco-user`).
pub async fn register_validating_webhook_without_mco_exclusion(
    cp: &ControlPlane,
    guard: &Guard,
) -> Result<()> {
    let mut config = webhook_configuration(&guard.base_url(), guard.ca_pem())?;
    let webhooks = config.webhooks.as_mut().ok_or("no webhooks")?;
    webhooks.retain(|w| w.name == "deletions.mosc-guard.dev");
    for w in webhooks.iter_mut() {
        if let Some(conditions) = w.match_conditions.as_mut() {
            conditions.retain(|c| !c.expression.contains("userInfo.username"));
        }
    }
    register(cp, &guard.base_url(), &config, PROBE_VALIDATING).await
}

/// Applies [`mutating_webhook_configuration`] and waits until it is in effect (as
/// [`register_validating_webhook`] does).
pub async fn register_mutating_webhook(cp: &ControlPlane, guard: &Guard) -> Result<()> {
    let config = mutating_webhook_configuration(guard)?;
    register(cp, &guard.base_url(), &config, PROBE_MUTATING).await
}

async fn register<K>(cp: &ControlPlane, url_base: &str, config: &K, probe: Probe) -> Result<()>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let started = Instant::now();
    let name = config
        .meta()
        .name
        .clone()
        .ok_or("the rendered webhook configuration has no name")?;
    let api: Api<K> = Api::all(cp.client());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(config),
    )
    .await
    .map_err(|e| format!("applying {} {name}: {e}", probe.kind))?;
    wait_until_active(cp, probe, Duration::from_secs(30)).await?;
    tracing::info!(
        "{} {name} -> {} active after {:.2?}",
        probe.kind,
        url_base,
        started.elapsed()
    );
    Ok(())
}

/// [`register_validating_webhook`], and with `mutating` [`register_mutating_webhook`] too (defer
/// mode's finalizer).
pub async fn register_webhooks(cp: &ControlPlane, guard: &Guard, mutating: bool) -> Result<()> {
    register_validating_webhook(cp, guard).await?;
    if mutating {
        register_mutating_webhook(cp, guard).await?;
    }
    Ok(())
}

/// Removes the guard's ValidatingWebhookConfiguration (what `kubectl delete -f` of the manifest does).
pub async fn unregister_validating_webhook(cp: &ControlPlane) -> Result<()> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(cp.client());
    let name = manifests::validating_webhook_configuration()?
        .metadata
        .name
        .ok_or("the rendered configuration has no name")?;
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A probe configuration of one kind (see [`register_validating_webhook`]).
#[derive(Clone, Copy)]
struct Probe {
    kind: &'static str,
    plural: &'static str,
    config: &'static str,
    webhook: &'static str,
}

const PROBE_VALIDATING: Probe = Probe {
    kind: "ValidatingWebhookConfiguration",
    plural: "validatingwebhookconfigurations",
    config: "mosc-guard-e2e-probe",
    webhook: "probe.mosc-guard-e2e.dev",
};

const PROBE_MUTATING: Probe = Probe {
    kind: "MutatingWebhookConfiguration",
    plural: "mutatingwebhookconfigurations",
    config: "mosc-guard-e2e-mutating-probe",
    webhook: "mutating-probe.mosc-guard-e2e.dev",
};

const PROBE_LABEL: &str = "mosc-guard-e2e/webhook-probe";

async fn wait_until_active(cp: &ControlPlane, probe: Probe, timeout: Duration) -> Result<()> {
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", probe.kind),
        probe.plural,
    );
    let configs: Api<DynamicObject> = Api::all_with(cp.client(), &resource);
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": probe.kind,
        "metadata": {"name": probe.config},
        "webhooks": [{
            "name": probe.webhook,
            "admissionReviewVersions": ["v1"],
            // Port 1 on loopback: nothing listens, so the call fails at once.
            "clientConfig": {"url": "https://127.0.0.1:1/probe"},
            "rules": [{
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["namespaces"],
                "scope": "Cluster"
            }],
            "objectSelector": {"matchLabels": {PROBE_LABEL: nonce}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 2
        }]
    }))?;
    // A later resourceVersion than every configuration of this kind written so far.
    configs
        .patch(
            probe.config,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&config),
        )
        .await
        .map_err(|e| format!("applying webhook probe {}: {e}", probe.config))?;

    let namespaces: Api<Namespace> = Api::all(cp.client());
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("mosc-guard-e2e-probe-{nonce}")),
            labels: Some([(PROBE_LABEL.to_owned(), nonce.clone())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + timeout;
    let result = loop {
        match namespaces.create(&dry_run, &ns).await {
            Err(kube::Error::Api(s)) if s.message.contains(probe.webhook) => break Ok(()),
            Ok(_) => {}
            Err(e) => tracing::debug!("webhook probe: {e}"),
        }
        if Instant::now() >= deadline {
            break Err(format!("{}s not in effect after {timeout:?}", probe.kind).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if let Err(e) = configs.delete(probe.config, &DeleteParams::default()).await {
        tracing::warn!("deleting webhook probe configuration: {e}");
    }
    result
}
