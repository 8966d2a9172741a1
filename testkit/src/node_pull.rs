//! A node's pull of a layered image, as the simulator's daemon makes it with
//! [`crate::simulator::SimConfig::pull_as_node`]: what MCO's daemon writes from the
//! ControllerConfig `machine-config-controller` (the pull secret
//! `internalRegistryPullSecret`, per-host CAs `imageRegistryBundleData`/`UserData` with `..` for
//! `:`), the ImageDigestMirrorSets as registries.conf applies them to a digest (mirrors in
//! order, then the source unless `NeverContactSource`), and containers/image's HTTPS pull with
//! Docker token auth. Written separately from the guard's checker (`access::registry`), so the
//! two are not one code path tested against itself; it knows only what the kit's tests use
//! (a source that is a host or a path prefix; no wildcard, no proxy).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use kube::api::ListParams;
use reqwest::StatusCode;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

use crate::image_ref::ImageRef;
use crate::mco::{CONTROLLER_CONFIGS, IMAGE_DIGEST_MIRROR_SETS, dynamic_api};

fn decode(data: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()
}

/// What the daemon wrote from the ControllerConfig: credentials by registry host, CA by host.
struct NodeFiles {
    auths: BTreeMap<String, (String, String)>,
    cas: BTreeMap<String, String>,
}

async fn node_files(client: &kube::Client) -> Result<NodeFiles, String> {
    let cc = dynamic_api(client, CONTROLLER_CONFIGS)
        .get("machine-config-controller")
        .await
        .map_err(|e| format!("reading the ControllerConfig: {e}"))?;
    let spec = cc.data.get("spec").cloned().unwrap_or_default();
    let mut auths = BTreeMap::new();
    if let Some(secret) = spec["internalRegistryPullSecret"].as_str().and_then(decode) {
        let file: Value = serde_json::from_slice(&secret).unwrap_or_default();
        for (host, entry) in file["auths"].as_object().into_iter().flatten() {
            let Some(pair) = entry["auth"].as_str().and_then(decode) else {
                continue;
            };
            let pair = String::from_utf8_lossy(&pair).into_owned();
            if let Some((user, password)) = pair.split_once(':') {
                auths.insert(host.clone(), (user.to_string(), password.to_string()));
            }
        }
    }
    let mut cas = BTreeMap::new();
    for field in ["imageRegistryBundleData", "imageRegistryBundleUserData"] {
        for bundle in spec[field].as_array().into_iter().flatten() {
            if let (Some(file), Some(data)) = (
                bundle["file"].as_str(),
                bundle["data"].as_str().and_then(decode),
            ) {
                cas.insert(
                    file.replace("..", ":"),
                    String::from_utf8_lossy(&data).into_owned(),
                );
            }
        }
    }
    Ok(NodeFiles { auths, cas })
}

/// `host/repo` places to pull from, in order.
async fn places(client: &kube::Client, image: &ImageRef) -> Result<Vec<(String, String)>, String> {
    let name = format!("{}/{}", image.host, image.repo);
    let sets = dynamic_api(client, IMAGE_DIGEST_MIRROR_SETS)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut best: Option<(usize, Vec<String>, bool)> = None;
    for set in &sets {
        for m in set.data["spec"]["imageDigestMirrors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(source) = m["source"].as_str() else {
                continue;
            };
            let matched = name == source || name.starts_with(&format!("{source}/"));
            if !matched || best.as_ref().is_some_and(|(n, _, _)| *n >= source.len()) {
                continue;
            }
            let mirrors = m["mirrors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str);
            let rest = &name[source.len()..];
            let list = mirrors.map(|mirror| format!("{mirror}{rest}")).collect();
            best = Some((
                source.len(),
                list,
                m["mirrorSourcePolicy"] == "NeverContactSource",
            ));
        }
    }
    let mut out: Vec<String> = Vec::new();
    let never = match best {
        Some((_, mirrors, never)) if image.digest.is_some() => {
            out.extend(mirrors);
            never
        }
        _ => false,
    };
    if !never {
        out.push(name);
    }
    Ok(out
        .into_iter()
        .filter_map(|p| {
            p.split_once('/')
                .map(|(h, r)| (h.to_string(), r.to_string()))
        })
        .collect())
}

fn http_client(ca: Option<&str>) -> Result<reqwest::Client, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            let cert = cert.map_err(|e| e.to_string())?;
            roots.add(cert).map_err(|e| e.to_string())?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())
}

/// The `realm` and `service` of a `Bearer` challenge (the kit's registries quote both).
fn bearer(header: &str) -> Option<(String, Option<String>)> {
    let rest = header.strip_prefix("Bearer ")?;
    let param = |name: &str| {
        let start = rest.find(&format!("{name}=\""))? + name.len() + 2;
        let end = rest[start..].find('"')? + start;
        Some(rest[start..end].to_string())
    };
    Some((param("realm")?, param("service")))
}

/// One place: the manifest, through the token exchange when challenged.
async fn pull_from(
    files: &NodeFiles,
    host: &str,
    repo: &str,
    reference: &str,
) -> Result<(), String> {
    let client = http_client(files.cas.get(host).map(String::as_str))?;
    let url = format!("https://{host}/v2/{repo}/manifests/{reference}");
    let accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
    let send = |token: Option<String>| {
        let mut req = client.get(&url).header("Accept", accept);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let failed = |e: reqwest::Error| format!("pinging container registry {host}: {e}");
    let mut resp = send(None).await.map_err(failed)?;
    if resp.status() == StatusCode::UNAUTHORIZED {
        let challenge = resp
            .headers()
            .get("WWW-Authenticate")
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
            .ok_or("authentication required")?;
        let (realm, service) = challenge;
        let mut realm = reqwest::Url::parse(&realm).map_err(|e| format!("token realm: {e}"))?;
        realm
            .query_pairs_mut()
            .append_pair("scope", &format!("repository:{repo}:pull"));
        if let Some(service) = service {
            realm.query_pairs_mut().append_pair("service", &service);
        }
        let mut token_req = client.get(realm);
        if let Some((user, password)) = files.auths.get(host) {
            token_req = token_req.basic_auth(user, Some(password));
        }
        let token: Value = token_req
            .send()
            .await
            .map_err(failed)?
            .error_for_status()
            .map_err(|e| format!("authenticating to {host}: {e}"))?
            .json()
            .await
            .map_err(failed)?;
        let token = token["token"]
            .as_str()
            .ok_or("the token service sent no token")?
            .to_string();
        resp = send(Some(token)).await.map_err(failed)?;
    }
    if resp.status().is_success() {
        return Ok(());
    }
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or_default();
    let message = body["errors"][0]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("HTTP {status}"));
    Err(message)
}

/// Pulls `image`'s manifest as a node does; the error as containers/image words it
/// (`reading manifest <ref> in <repo>: manifest unknown`).
pub async fn pull(client: &kube::Client, image: &str) -> Result<(), String> {
    let image = ImageRef::parse(image).map_err(|e| e.to_string())?;
    let reference = image
        .digest
        .clone()
        .or_else(|| image.tag.clone())
        .unwrap_or_else(|| "latest".to_string());
    let files = node_files(client).await?;
    let mut last = String::from("no place to pull from");
    for (host, repo) in places(client, &image).await? {
        match pull_from(&files, &host, &repo, &reference).await {
            Ok(()) => return Ok(()),
            Err(e) => last = format!("reading manifest {reference} in {host}/{repo}: {e}"),
        }
    }
    Err(last)
}
