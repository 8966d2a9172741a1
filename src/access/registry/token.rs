//! Docker's registry token protocol (distribution's `docs/spec/auth/token.md`), as
//! containers/image speaks it: a 401 with `WWW-Authenticate: Bearer realm=...,service=...`
//! sends the client to the realm with `service` and a `scope` (`repository:<name>:pull` for a
//! read; `repository:<name>:*` for a delete, as containers/image asks), with the user's Basic
//! credentials when it has any, for a `token` (or `access_token`) to send as
//! `Authorization: Bearer`. A `Basic` challenge takes the credentials directly.

use std::time::Duration;

use serde::Deserialize;

use super::http::{chain, read_bounded};
use crate::core::registry::auth::Credential;

/// What a registry's `WWW-Authenticate` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    Bearer {
        realm: String,
        service: Option<String>,
    },
    Basic,
}

/// The first challenge of a scheme we speak in `header`, if any.
pub fn parse(header: &str) -> Option<Challenge> {
    let challenges = http_auth::parse_challenges(header).ok()?;
    for c in challenges {
        let param = |name: &str| {
            c.params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_unescaped())
        };
        if c.scheme.eq_ignore_ascii_case("bearer") {
            let realm = param("realm")?;
            return Some(Challenge::Bearer {
                realm,
                service: param("service"),
            });
        }
        if c.scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
    }
    None
}

#[derive(Deserialize)]
struct TokenBody {
    token: Option<String>,
    access_token: Option<String>,
    expires_in: Option<u64>,
}

/// A bearer token and how long it lasts.
pub struct Token {
    pub value: String,
    pub lifetime: Duration,
}

/// Asks the realm for a token for `scope` (`repository:<name>:<actions>`). The error is words
/// without secrets (the caller also redacts).
pub async fn fetch(
    client: &reqwest::Client,
    realm: &str,
    service: Option<&str>,
    scope: &str,
    credential: Option<&Credential>,
    limit: usize,
) -> Result<Token, String> {
    let host = host_of(realm);
    let mut url = reqwest::Url::parse(realm)
        .map_err(|_| format!("the registry's token realm {host} is not a URL"))?;
    url.query_pairs_mut()
        .append_pair("scope", scope)
        .extend_pairs(service.map(|service| ("service", service)));
    let mut request = client.get(url);
    if let Some(c) = credential {
        request = request.basic_auth(&c.username, Some(c.password()));
    }
    let failed = |e: reqwest::Error| format!("token service {host}: {}", chain(&e));
    let resp = request.send().await.map_err(failed)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!(
            "token service {host} answered HTTP {}",
            status.as_u16()
        ));
    }
    let body = read_bounded(resp, limit)
        .await
        .map_err(failed)?
        .ok_or_else(|| format!("token service {host} answered more than {limit} bytes"))?;
    let parsed: TokenBody = serde_json::from_slice(&body)
        .map_err(|_| format!("token service {host} answered something that is not a token"))?;
    let value = parsed
        .token
        .or(parsed.access_token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("token service {host} answered no token"))?;
    // distribution's default is 60 s; keep a margin, and never trust a huge value.
    let lifetime = Duration::from_secs(parsed.expires_in.unwrap_or(60).clamp(10, 3600) - 5);
    Ok(Token { value, lifetime })
}

/// The host (`host[:port]`) of a URL, for words (never its query) and the proxy decision.
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

#[cfg(test)]
mod tests;
