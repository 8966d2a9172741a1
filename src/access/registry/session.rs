//! One set of registry credentials in use, for any host and repository they cover: each request
//! goes with the token cached for its host, repository and [`Actions`] (fetched on a `401` by the
//! token protocol, [`super::token`]), bounded ([`Limits`]), and every reason redacted
//! ([`Redactor`]). The [`Checker`](super::Checker), the tag reader and the delete all send
//! through one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::WWW_AUTHENTICATE;
use reqwest::{Method, StatusCode};
use sha2::{Digest, Sha256};

use super::http::{Clients, Redactor, chain, read_bounded};
use super::token::{self, Challenge};
use crate::core::registry::answer::{Ping, RegistryError, Reply};
use crate::core::registry::auth::Credential;
use crate::core::registry::node_config::PullConfig;

/// The manifest types a node's pull accepts (containers/image's list).
pub const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v1+prettyjws";

/// The bounds of every request (see the module doc of [`super`]).
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

/// How long a host's answer to `GET /v2/` is reused.
const PING_TTL: Duration = Duration::from_secs(300);

/// What a request may do to a repository: the actions of the token's scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Actions {
    /// Read manifests and tags: `pull`.
    Pull,
    /// Everything, a delete included: `*` (containers/image's `deleteImage`; Quay refuses a
    /// `delete` scope but takes `*`).
    All,
}

impl Actions {
    fn scope(self) -> &'static str {
        match self {
            Actions::Pull => "pull",
            Actions::All => "*",
        }
    }
}

/// One request: what it asks of which repository on which host.
pub struct Request<'a> {
    pub method: Method,
    pub host: &'a str,
    pub repository: &'a str,
    /// The path and query (`/v2/<repository>/...`).
    pub path: &'a str,
    pub accept: &'a str,
    pub actions: Actions,
}

impl<'a> Request<'a> {
    /// A read: `GET`, with a `pull` token.
    pub fn get(host: &'a str, repository: &'a str, path: &'a str, accept: &'a str) -> Self {
        Request {
            method: Method::GET,
            host,
            repository,
            path,
            accept,
            actions: Actions::Pull,
        }
    }
}

type TokenKey = (String, String, Actions);

/// Credentials, CAs and proxy in use, with their tokens and pings.
pub struct Session {
    config: Arc<PullConfig>,
    clients: Clients,
    limits: Limits,
    tokens: Mutex<HashMap<TokenKey, (String, Instant)>>,
    pings: Mutex<HashMap<String, (Ping, Instant)>>,
    redactor: Redactor,
    requests: AtomicU64,
}

enum Auth<'a> {
    Bearer(&'a str),
    Basic(&'a Credential),
}

impl Session {
    /// A session with `config`'s credentials, CAs and proxy (its mirrors are not used here:
    /// the caller says which host to ask).
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
        Session {
            clients: Clients::new(Arc::clone(&config), limits.clone()),
            config,
            limits,
            tokens: Mutex::new(HashMap::new()),
            pings: Mutex::new(HashMap::new()),
            redactor,
            requests: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &PullConfig {
        &self.config
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// HTTP requests made so far (pings, tokens and the requests themselves).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// `text` without any secret the session holds.
    pub fn clean(&self, text: &str) -> String {
        self.redactor.clean(text)
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// How `host` answers `GET /v2/` (reused for a few minutes).
    pub async fn ping(&self, host: &str) -> Ping {
        if let Ok(pings) = self.pings.lock()
            && let Some((ping, at)) = pings.get(host)
            && at.elapsed() < PING_TTL
        {
            return ping.clone();
        }
        let client = match self.clients.for_host(host) {
            Ok(c) => c,
            Err(e) => return Ping::Failed(e),
        };
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

    fn cached_token(&self, key: &TokenKey) -> Option<String> {
        let tokens = self.tokens.lock().ok()?;
        let (token, until) = tokens.get(key)?;
        (Instant::now() < *until).then(|| token.clone())
    }

    /// Sends `request`, through the token protocol when the registry challenges. An answer
    /// that is not a response is a [`Reply`] (`Failed`, `TokenRefused`), its words redacted.
    pub async fn send(&self, request: &Request<'_>) -> Result<reqwest::Response, Reply> {
        let redact = |reply: Reply| match reply {
            Reply::Failed(why) => Reply::Failed(self.clean(&why)),
            Reply::TokenRefused(why) => Reply::TokenRefused(self.clean(&why)),
            other => other,
        };
        self.send_unredacted(request).await.map_err(redact)
    }

    async fn send_unredacted(&self, request: &Request<'_>) -> Result<reqwest::Response, Reply> {
        let client = self.clients.for_host(request.host).map_err(Reply::Failed)?;
        let url = format!("https://{}{}", request.host, request.path);
        let credential = self.config.auths.lookup(request.host, request.repository);
        let key = (
            request.host.to_string(),
            request.repository.to_string(),
            request.actions,
        );
        let token = self.cached_token(&key);
        let first = self
            .once(&client, request, &url, token.as_deref().map(Auth::Bearer))
            .await?;
        if first.status() != StatusCode::UNAUTHORIZED {
            return Ok(first);
        }
        let challenge = first
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(token::parse);
        match challenge {
            Some(Challenge::Bearer { realm, service }) => {
                self.count();
                let realm_client = self
                    .clients
                    .for_request(request.host, token::host_of(&realm))
                    .map_err(Reply::TokenRefused)?;
                let scope = format!(
                    "repository:{}:{}",
                    request.repository,
                    request.actions.scope()
                );
                let token = token::fetch(
                    &realm_client,
                    &realm,
                    service.as_deref(),
                    &scope,
                    credential,
                    self.limits.small_bytes,
                )
                .await
                .map_err(Reply::TokenRefused)?;
                self.redactor.remember(&token.value);
                if let Ok(mut tokens) = self.tokens.lock() {
                    tokens.insert(key, (token.value.clone(), Instant::now() + token.lifetime));
                }
                self.once(&client, request, &url, Some(Auth::Bearer(&token.value)))
                    .await
            }
            Some(Challenge::Basic) if credential.is_some() => {
                self.once(&client, request, &url, credential.map(Auth::Basic))
                    .await
            }
            _ => Ok(first),
        }
    }

    async fn once(
        &self,
        client: &reqwest::Client,
        request: &Request<'_>,
        url: &str,
        auth: Option<Auth<'_>>,
    ) -> Result<reqwest::Response, Reply> {
        self.count();
        let builder = client
            .request(request.method.clone(), url)
            .header(reqwest::header::ACCEPT, request.accept);
        let builder = match auth {
            Some(Auth::Bearer(t)) => builder.bearer_auth(t),
            Some(Auth::Basic(c)) => builder.basic_auth(&c.username, Some(c.password())),
            None => builder,
        };
        builder.send().await.map_err(|e| Reply::Failed(chain(&e)))
    }

    /// A response read into a [`Reply`]: its status and, for an error, the registry's errors
    /// (bodies bounded: `limit` for a success, the small bound otherwise). The body of a
    /// success comes back too.
    pub async fn read(&self, resp: reqwest::Response, limit: usize) -> (Reply, Option<Vec<u8>>) {
        let status = resp.status().as_u16();
        let success = (200..300).contains(&status);
        let limit = if success {
            limit
        } else {
            self.limits.small_bytes
        };
        let body = match read_bounded(resp, limit).await {
            Err(e) => return (Reply::Failed(self.clean(&chain(&e))), None),
            Ok(None) => return (Reply::TooLarge { limit }, None),
            Ok(Some(body)) => body,
        };
        let errors = if success {
            Vec::new()
        } else {
            registry_errors(&body)
        };
        (
            Reply::Answered {
                status,
                errors,
                digest_matches: None,
            },
            success.then_some(body),
        )
    }
}

/// The lower-case hex of `body`'s sha256.
pub fn sha256_hex(body: &[u8]) -> String {
    format!("{:x}", Sha256::digest(body))
}

/// The `errors` of a registry's error body (none when it is not one).
pub fn registry_errors(body: &[u8]) -> Vec<RegistryError> {
    #[derive(serde::Deserialize)]
    struct Body {
        #[serde(default)]
        errors: Vec<RegistryError>,
    }
    serde_json::from_slice::<Body>(body)
        .map(|b| {
            b.errors
                .into_iter()
                .filter(|e| !e.code.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
