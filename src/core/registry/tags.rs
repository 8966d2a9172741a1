//! A repository's tags as distribution's API lists them (`docs/spec/api.md`, "Listing Image
//! Tags"; the OCI distribution spec's "content discovery"): `GET /v2/<name>/tags/list?n=N`
//! answers `{"name": ..., "tags": [...]}` a page at a time, and a `Link: <URL>; rel="next"`
//! header names the next page (`?n=N&last=TAG`). Pure: what a page says, and where the next
//! one is; the HTTP is `access::registry::tags`'.

use serde::Deserialize;

/// The tags of one page (none when the repository has none: distribution answers `null`).
pub fn page_tags(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct Page {
        tags: Option<Vec<String>>,
    }
    let page: Page = serde_json::from_slice(body)
        .map_err(|_| "the tag list is not the registry's JSON ({\"tags\": [...]})".to_string())?;
    Ok(page.tags.unwrap_or_default())
}

/// The URL of the next page from a `Link` header (RFC 8288: `<URL>; rel="next"`, possibly
/// among other links), as written: a path (`/v2/...`) or an absolute URL.
pub fn next_page(link: &str) -> Option<String> {
    link.split(',').find_map(|one| {
        let (target, params) = one.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params.split(';').any(|p| {
            p.trim()
                .strip_prefix("rel=")
                .map(|v| v.trim_matches('"'))
                .is_some_and(|rels| rels.split_whitespace().any(|r| r == "next"))
        });
        (next && !target.is_empty()).then(|| target.to_string())
    })
}

#[cfg(test)]
mod tests;
