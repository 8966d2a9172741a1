//! The product's manifests (`manifests/`, kustomize) as the tests see them: rendered with
//! `kubectl kustomize`, the single source for the webhook configurations the harness registers.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use serde::Deserialize;
use serde_json::Value;

use crate::Result;

/// The kubectl the harness uses everywhere (its embedded kustomize renders the manifests).
const KUBECTL: &str = "/usr/bin/kubectl";

/// `<repo>/manifests`.
pub fn manifests_dir() -> PathBuf {
    crate::repo_root().join("manifests")
}

/// Runs `kubectl kustomize <crate>/manifests/<dir>` (e.g. `base`, `overlays/openshift`) and
/// parses its multi-document YAML into one value per object, in kustomize's output order.
pub fn render(dir: &str) -> Result<Vec<Value>> {
    let yaml = render_yaml(dir)?;
    parse_documents(&yaml)
        .map_err(|e| format!("parsing `kubectl kustomize` of manifests/{dir}: {e}").into())
}

/// The YAML `kubectl kustomize <crate>/manifests/<dir>` prints.
pub fn render_yaml(dir: &str) -> Result<String> {
    let path = manifests_dir().join(dir);
    let output = Command::new(KUBECTL)
        .arg("kustomize")
        .arg(&path)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {KUBECTL} kustomize {}: {e}", path.display()))?;
    if !output.status.success() {
        return Err(format!(
            "`kubectl kustomize {}` failed ({}): {}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    String::from_utf8(output.stdout).map_err(|e| {
        format!(
            "`kubectl kustomize {}` printed non-UTF-8: {e}",
            path.display()
        )
        .into()
    })
}

/// Splits multi-document YAML into values, skipping empty documents.
pub fn parse_documents(yaml: &str) -> Result<Vec<Value>> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(yaml).enumerate() {
        let value = Value::deserialize(document).map_err(|e| format!("document {index}: {e}"))?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

/// The one object of `kind` named `name` among `objects`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    let mut found = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    match (found.next(), found.next()) {
        (Some(object), None) => Ok(object),
        (None, _) => Err(format!("no {kind} {name} among the rendered objects").into()),
        (Some(_), Some(_)) => {
            Err(format!("more than one {kind} {name} among the rendered objects").into())
        }
    }
}

/// The ValidatingWebhookConfiguration `mosc-guard` as rendered from `manifests/base`. Its
/// webhooks call the in-cluster Service; callers replace each `clientConfig` (URL + caBundle).
pub fn validating_webhook_configuration() -> Result<ValidatingWebhookConfiguration> {
    typed("base", "ValidatingWebhookConfiguration")
}

/// The MutatingWebhookConfiguration `mosc-guard` as rendered from `manifests/overlays/defer`;
/// callers replace each `clientConfig` (URL + caBundle).
pub fn mutating_webhook_configuration() -> Result<MutatingWebhookConfiguration> {
    typed("overlays/defer", "MutatingWebhookConfiguration")
}

/// The object `kind`/`mosc-guard` of `manifests/<dir>`, decoded as `T`.
fn typed<T: serde::de::DeserializeOwned>(dir: &str, kind: &str) -> Result<T> {
    let objects = render(dir)?;
    let object = find(&objects, kind, "mosc-guard")?;
    serde_json::from_value(object.clone())
        .map_err(|e| format!("decoding {kind} mosc-guard of manifests/{dir}: {e}").into())
}
