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
        #[serde(default)]
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
mod tests {
    use super::*;

    #[test]
    fn pages() {
        assert_eq!(
            page_tags(br#"{"name":"ocb/os","tags":["a","b"]}"#),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(page_tags(br#"{"name":"ocb/os","tags":null}"#), Ok(vec![]));
        assert_eq!(page_tags(br#"{"name":"ocb/os"}"#), Ok(vec![]));
        assert!(page_tags(b"<html>").is_err());
        assert!(page_tags(br#"{"tags":[1]}"#).is_err());
    }

    #[test]
    fn links() {
        let cases = [
            (
                r#"</v2/ocb/os/tags/list?last=b&n=2>; rel="next""#,
                Some("/v2/ocb/os/tags/list?last=b&n=2"),
            ),
            (
                r#"<https://r.example/v2/x/tags/list?n=2&last=b>; rel=next"#,
                Some("https://r.example/v2/x/tags/list?n=2&last=b"),
            ),
            (
                r#"</first>; rel="first", </v2/x/tags/list?last=c>; rel="next""#,
                Some("/v2/x/tags/list?last=c"),
            ),
            (r#"</v2/x/tags/list?last=c>; rel="prev""#, None),
            ("garbage", None),
            ("<>; rel=next", None),
        ];
        for (header, want) in cases {
            assert_eq!(next_page(header).as_deref(), want, "{header}");
        }
    }
}
