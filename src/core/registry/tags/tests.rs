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
