//! [`Checker`]: is an image still served, asked where and as a node pulls it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::http::{Clients, Redactor, chain, read_bounded};
use super::token::{self, Challenge};
use crate::core::registry::answer::{Exchange, Ping, RegistryError, Reply, Status, Verdict};
use crate::core::registry::node_config::PullConfig;
use crate::core::registry::sources::{PullSource, pull_sources};
use crate::core::registry::{combine, judge};

/// The manifest types a node's pull accepts (containers/image's list).
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v1+prettyjws";

/// How long a host's answer to `GET /v2/` is reused.
const PING_TTL: Duration = Duration::from_secs(300);

/// The bounds of every check (see the module doc of [`super`]).
#[derive(Clone, Debug)]
pub struct Limits {
    pub manifest_bytes: usize,
    pub small_bytes: usize,
    pub redirects: usize,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub image_timeout: Duration,
    pub concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            manifest_bytes: 4 << 20,
            small_bytes: 256 << 10,
            redirects: 3,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(15),
            image_timeout: Duration::from_secs(60),
            concurrency: 4,
        }
    }
}

/// What the places a node pulls one image from answered.
#[derive(Clone, Debug)]
pub struct ImageAnswer {
    pub image: String,
    /// The places together.
    pub verdict: Verdict,
    /// Each place asked (`host/repository@digest`), in order, and its answer. The places after
    /// one that served the image are not asked (the node would not ask them either).
    pub places: Vec<(String, Verdict)>,
}

impl ImageAnswer {
    pub fn status(&self) -> Status {
        self.verdict.status
    }
}

/// Asks registries, read-only, with a node's credentials, CAs, proxy and mirrors.
pub struct Checker {
    config: Arc<PullConfig>,
    clients: Clients,
    limits: Limits,
    permits: Semaphore,
    tokens: Mutex<HashMap<(String, String), (String, Instant)>>,
    pings: Mutex<HashMap<String, (Ping, Instant)>>,
    redactor: Redactor,
    requests: AtomicU64,
}

impl Checker {
    pub fn new(config: PullConfig, limits: Limits) -> Self {
        let redactor = Redactor::default();
        let config = Arc::new(config);
        for key in config.auths.keys() {
            let (host, repo) = key.split_once('/').unwrap_or((key, ""));
            if let Some(c) = config.auths.lookup(host, repo) {
                redactor.remember(c.password());
            }
        }
        for url in [&config.proxy.https_proxy, &config.proxy.http_proxy]
            .into_iter()
            .flatten()
        {
            if let Some((userinfo, _)) = url
                .split_once("://")
                .and_then(|(_, rest)| rest.split('/').next()?.rsplit_once('@'))
            {
                redactor.remember(userinfo);
            }
        }
        Checker {
            clients: Clients::new(
                Arc::clone(&config),
                limits.connect_timeout,
                limits.request_timeout,
                limits.redirects,
            ),
            permits: Semaphore::new(limits.concurrency.max(1)),
            config,
            limits,
            tokens: Mutex::new(HashMap::new()),
            pings: Mutex::new(HashMap::new()),
            redactor,
            requests: AtomicU64::new(0),
        }
    }

    /// HTTP requests made so far (pings, manifests, tokens), for the audit's cost.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The configuration it pulls with (its secrets redacted in `Debug`).
    pub fn config(&self) -> &PullConfig {
        &self.config
    }

    /// Checks every image, at most [`Limits::concurrency`] at once; answers in `images`' order.
    pub async fn check_all(&self, images: &[String]) -> Vec<ImageAnswer> {
        // `check` holds a permit of the semaphore: at most `concurrency` run at once.
        let checks: Vec<_> = images.iter().map(|i| self.check(i)).collect();
        futures::future::join_all(checks).await
    }

    /// Asks where a node pulls `image` from, in the node's order, until one serves it.
    pub async fn check(&self, image: &str) -> ImageAnswer {
        let _permit = self.permits.acquire().await;
        let answer =
            tokio::time::timeout(self.limits.image_timeout, self.check_places(image)).await;
        let mut answer = answer.unwrap_or_else(|_| ImageAnswer {
            image: image.to_string(),
            verdict: Verdict {
                status: Status::Unknown,
                why: format!("no answer within {} s", self.limits.image_timeout.as_secs()),
            },
            places: Vec::new(),
        });
        answer.verdict.why = self.redactor.clean(&answer.verdict.why);
        for (_, v) in &mut answer.places {
            v.why = self.redactor.clean(&v.why);
        }
        answer
    }

    async fn check_places(&self, image: &str) -> ImageAnswer {
        let places = match pull_sources(image, &self.config.mirrors) {
            Ok(p) => p,
            Err(e) => {
                return ImageAnswer {
                    image: image.to_string(),
                    verdict: Verdict {
                        status: Status::Unknown,
                        why: e,
                    },
                    places: Vec::new(),
                };
            }
        };
        let mut answered: Vec<(String, Verdict)> = Vec::new();
        for place in &places {
            let exchange = self.ask(place).await;
            let verdict = judge(&exchange);
            let served = verdict.status == Status::Available;
            answered.push((place.spec(), verdict));
            if served {
                break;
            }
        }
        let verdict = combine(answered.iter().map(|(p, v)| (p.as_str(), v)));
        ImageAnswer {
            image: image.to_string(),
            verdict,
            places: answered,
        }
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// One place: the manifest (with a token when challenged), and `/v2/` unless it was served.
    async fn ask(&self, place: &PullSource) -> Exchange {
        let client = match self.clients.for_host(&place.host) {
            Ok(c) => c,
            Err(e) => {
                return Exchange {
                    ping: Some(Ping::Failed(e)),
                    manifest: None,
                };
            }
        };
        let manifest = self.manifest(&client, place).await;
        let served = matches!(manifest, Reply::Answered { status: 200, .. });
        let ping = if served || matches!(manifest, Reply::Failed(_)) {
            None
        } else {
            Some(self.ping(&client, &place.host).await)
        };
        Exchange {
            ping,
            manifest: Some(manifest),
        }
    }

    async fn ping(&self, client: &reqwest::Client, host: &str) -> Ping {
        if let Ok(pings) = self.pings.lock()
            && let Some((ping, at)) = pings.get(host)
            && at.elapsed() < PING_TTL
        {
            return ping.clone();
        }
        self.count();
        let ping = match client.get(format!("https://{host}/v2/")).send().await {
            Err(e) => Ping::Failed(chain(&e)),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let headers = resp.headers();
                let api_version = headers
                    .get("docker-distribution-api-version")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.trim().starts_with("registry/2"));
                let challenge = headers.get(WWW_AUTHENTICATE).is_some();
                // Drained (bounded) so the connection can be reused; its content is not read.
                let _ = read_bounded(resp, self.limits.small_bytes).await;
                Ping::Answered {
                    status,
                    api_version,
                    challenge,
                }
            }
        };
        if let (Ping::Answered { .. }, Ok(mut pings)) = (&ping, self.pings.lock()) {
            pings.insert(host.to_string(), (ping.clone(), Instant::now()));
        }
        ping
    }

    fn cached_token(&self, place: &PullSource) -> Option<String> {
        let tokens = self.tokens.lock().ok()?;
        let (token, until) = tokens.get(&(place.host.clone(), place.repository.clone()))?;
        (Instant::now() < *until).then(|| token.clone())
    }

    async fn manifest(&self, client: &reqwest::Client, place: &PullSource) -> Reply {
        let url = format!(
            "https://{}/v2/{}/manifests/{}",
            place.host, place.repository, place.reference
        );
        let credential = self.config.auths.lookup(&place.host, &place.repository);
        let token = self.cached_token(place);
        let first = self
            .get(client, &url, token.as_deref().map(Auth::Bearer))
            .await;
        let resp = match first {
            Err(reply) => return reply,
            Ok(resp) if resp.status() != StatusCode::UNAUTHORIZED => resp,
            Ok(resp) => {
                let challenge = resp
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(token::parse);
                match challenge {
                    Some(Challenge::Bearer { realm, service }) => {
                        self.count();
                        let realm_client = match self
                            .clients
                            .for_request(&place.host, token::host_of(&realm))
                        {
                            Ok(c) => c,
                            Err(e) => return Reply::TokenRefused(e),
                        };
                        let fetched = token::fetch(
                            &realm_client,
                            &realm,
                            service.as_deref(),
                            &place.repository,
                            credential,
                            self.limits.small_bytes,
                        )
                        .await;
                        let token = match fetched {
                            Ok(t) => t,
                            Err(e) => return Reply::TokenRefused(e),
                        };
                        self.redactor.remember(&token.value);
                        if let Ok(mut tokens) = self.tokens.lock() {
                            tokens.insert(
                                (place.host.clone(), place.repository.clone()),
                                (token.value.clone(), Instant::now() + token.lifetime),
                            );
                        }
                        match self
                            .get(client, &url, Some(Auth::Bearer(&token.value)))
                            .await
                        {
                            Ok(r) => r,
                            Err(reply) => return reply,
                        }
                    }
                    Some(Challenge::Basic) if credential.is_some() => {
                        match self.get(client, &url, credential.map(Auth::Basic)).await {
                            Ok(r) => r,
                            Err(reply) => return reply,
                        }
                    }
                    _ => resp,
                }
            }
        };
        self.reply(resp, &place.reference).await
    }

    async fn get(
        &self,
        client: &reqwest::Client,
        url: &str,
        auth: Option<Auth<'_>>,
    ) -> Result<reqwest::Response, Reply> {
        self.count();
        let mut request = client.get(url).header(ACCEPT, ACCEPT_MANIFESTS);
        request = match auth {
            Some(Auth::Bearer(t)) => request.bearer_auth(t),
            Some(Auth::Basic(c)) => request.basic_auth(&c.username, Some(c.password())),
            None => request,
        };
        request.send().await.map_err(|e| Reply::Failed(chain(&e)))
    }

    async fn reply(&self, resp: reqwest::Response, reference: &str) -> Reply {
        let status = resp.status().as_u16();
        let limit = if status == 200 {
            self.limits.manifest_bytes
        } else {
            self.limits.small_bytes
        };
        let body = match read_bounded(resp, limit).await {
            Err(e) => return Reply::Failed(chain(&e)),
            Ok(None) => return Reply::TooLarge { limit },
            Ok(Some(body)) => body,
        };
        if status == 200 {
            let digest_matches = reference.strip_prefix("sha256:").map(|hex| {
                let got: String = Sha256::digest(&body)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                got.eq_ignore_ascii_case(hex)
            });
            return Reply::Answered {
                status,
                errors: Vec::new(),
                digest_matches,
            };
        }
        Reply::Answered {
            status,
            errors: registry_errors(&body),
            digest_matches: None,
        }
    }
}

enum Auth<'a> {
    Bearer(&'a str),
    Basic(&'a crate::core::registry::auth::Credential),
}

/// The `errors` of a registry's error body (none when it is not one).
fn registry_errors(body: &[u8]) -> Vec<RegistryError> {
    #[derive(serde::Deserialize)]
    struct Body {
        #[serde(default)]
        errors: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    serde_json::from_slice::<Body>(body)
        .map(|b| {
            b.errors
                .into_iter()
                .filter(|e| !e.code.is_empty())
                .map(|e| RegistryError {
                    code: e.code,
                    message: e.message,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let e = registry_errors(
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#,
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].code, "MANIFEST_UNKNOWN");
        assert!(registry_errors(b"<html>404</html>").is_empty());
        assert!(registry_errors(br#"{"errors":[{"message":"no code"}]}"#).is_empty());
    }
}
