//! What a repository holds, read-only, with one session's credentials (`prune`: the push secret;
//! `serve`'s audit: the nodes' pull secret): its tags (`GET /v2/<name>/tags/list`, a page at a
//! time, the next page only on the same host), and the digest each names (the sha256 of its
//! manifest, checked against `Docker-Content-Digest`). A tag is gone only on the registry's own
//! not-found answer ([`crate::core::registry::judge`]); anything else could not be told.

use crate::core::registry::internal::Internal;
use std::sync::Arc;

use futures::StreamExt as _;

use super::session::{ACCEPT_MANIFESTS, Request, Session, sha256_hex};
use crate::core::registry::answer::{Exchange, Reply, Status};
use crate::core::registry::judge;
use crate::core::registry::listing::{Listing, PushRepository, Resolved, TagAnswer};
use crate::core::registry::tags::{next_page, page_tags};

/// Tags asked for per page.
const PAGE: usize = 1000;
/// Pages followed per repository.
const MAX_PAGES: usize = 100;
/// Tags listed per repository (a repository with more is not listed).
const MAX_TAGS: usize = 10_000;

/// Reads tags and what they hold, with one session's credentials.
#[derive(Clone)]
pub struct TagReader {
    session: Arc<Session>,
    page: usize,
}

impl TagReader {
    pub fn new(session: Arc<Session>) -> Self {
        TagReader {
            session,
            page: PAGE,
        }
    }

    /// Asks for pages of `n` tags (at least 1) instead of 1,000.
    pub fn with_page(self, n: usize) -> Self {
        TagReader {
            page: n.max(1),
            ..self
        }
    }

    /// Lists `source` and resolves every tag: the listing prune plans from.
    pub async fn listing(&self, source: &PushRepository, internal: Internal) -> Listing {
        let tags = match self.list(&source.host, &source.path).await {
            Ok(tags) => Ok(self.resolve_all(&source.host, &source.path, &tags).await),
            Err(why) => Err(why),
        };
        Listing {
            source: source.clone(),
            internal,
            tags,
        }
    }

    /// Every tag of `repository` on `host`, in the registry's order.
    pub async fn list(&self, host: &str, repository: &str) -> Result<Vec<String>, String> {
        let mut path = format!("/v2/{repository}/tags/list?n={}", self.page);
        let mut tags: Vec<String> = Vec::new();
        for _ in 0..MAX_PAGES {
            let request = Request::get(host, repository, &path, "application/json");
            let resp = match self.session.send(&request).await {
                Ok(r) => r,
                Err(reply) => return Err(self.words(host, reply).await),
            };
            let link = resp
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let limit = self.session.limits().manifest_bytes;
            let (reply, body) = self.session.read(resp, limit).await;
            let body = match (&reply, body) {
                (Reply::Answered { status: 200, .. }, Some(body)) => body,
                // The repository does not exist (yet): it holds nothing.
                _ if name_unknown(&reply) => return Ok(tags),
                _ => return Err(self.words(host, reply).await),
            };
            tags.extend(page_tags(&body)?);
            if tags.len() > MAX_TAGS {
                return Err(format!(
                    "more than {MAX_TAGS} tags: too many to resolve one by one here"
                ));
            }
            let Some(next) = link.as_deref().and_then(next_page) else {
                return Ok(tags);
            };
            let next = same_host(host, &next).ok_or_else(|| {
                format!("the registry sent the next page of tags elsewhere ({next})")
            })?;
            if next == path {
                return Err("the registry sent the same page of tags again".to_string());
            }
            path = next;
        }
        Err(format!(
            "more than {MAX_PAGES} pages of tags: too many to resolve one by one here"
        ))
    }

    /// What each of `tags` holds, at most the session's concurrency at once, in their order.
    pub async fn resolve_all(
        &self,
        host: &str,
        repository: &str,
        tags: &[String],
    ) -> Vec<TagAnswer> {
        let concurrency = self.session.limits().concurrency.max(1);
        // Owned tags: a closure over `&String` is higher-ranked, and the future would not be
        // `Send` for `tokio::spawn` (serve's audit runs it on a task of its own).
        futures::stream::iter(tags.iter().cloned())
            .map(|tag| async move {
                let resolved = self.resolve(host, repository, &tag).await;
                TagAnswer { tag, resolved }
            })
            .buffered(concurrency)
            .collect()
            .await
    }

    /// What `reference` (a tag, or a digest) of `repository` holds now.
    pub async fn resolve(&self, host: &str, repository: &str, reference: &str) -> Resolved {
        let path = format!("/v2/{repository}/manifests/{reference}");
        let request = Request::get(host, repository, &path, ACCEPT_MANIFESTS);
        let resp = match self.session.send(&request).await {
            Ok(r) => r,
            Err(reply) => return Resolved::Unknown(self.words(host, reply).await),
        };
        let named = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase());
        let limit = self.session.limits().manifest_bytes;
        match self.session.read(resp, limit).await {
            (Reply::Answered { status: 200, .. }, Some(body)) => {
                let digest = format!("sha256:{}", sha256_hex(&body));
                match named {
                    Some(n) if n.starts_with("sha256:") && n != digest => {
                        Resolved::Unknown(format!(
                            "the registry names it {n}, but the manifest it served is {digest}"
                        ))
                    }
                    _ => Resolved::Available(digest),
                }
            }
            (reply, _) => {
                let verdict = self.judged(host, reply).await;
                let why = self.session.clean(&verdict.why);
                match verdict.status {
                    Status::Missing => Resolved::Missing(why),
                    _ => Resolved::Unknown(why),
                }
            }
        }
    }

    /// What a reply that is not a success comes to, asking `/v2/` as a node's pull would.
    async fn judged(&self, host: &str, reply: Reply) -> crate::core::registry::Answer {
        let ping = match reply {
            Reply::Failed(_) => None,
            _ => Some(self.session.ping(host).await),
        };
        judge(&Exchange {
            ping,
            manifest: Some(reply),
        })
    }

    async fn words(&self, host: &str, reply: Reply) -> String {
        let verdict = self.judged(host, reply).await;
        self.session.clean(&verdict.why)
    }
}

/// The registry's own answer that the repository does not exist.
fn name_unknown(reply: &Reply) -> bool {
    matches!(reply, Reply::Answered { status: 404, errors, .. }
        if errors.iter().any(|e| e.code.eq_ignore_ascii_case("NAME_UNKNOWN")))
}

/// The path and query of `next` when it stays on `host` (a path, or a URL of `https://host`).
fn same_host(host: &str, next: &str) -> Option<String> {
    if next.starts_with('/') {
        return Some(next.to_string());
    }
    let rest = next.strip_prefix("https://")?;
    let (authority, path) = rest.split_once('/')?;
    authority
        .eq_ignore_ascii_case(host)
        .then(|| format!("/{path}"))
}

#[cfg(test)]
mod tests;
