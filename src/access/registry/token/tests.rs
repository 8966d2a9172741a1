use super::*;

#[test]
fn challenges() {
    assert_eq!(
        parse(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a:pull""#
        ),
        Some(Challenge::Bearer {
            realm: "https://auth.example/token".into(),
            service: Some("registry.example".into())
        })
    );
    assert_eq!(
        parse(r#"Basic realm="Registry Realm""#),
        Some(Challenge::Basic)
    );
    assert_eq!(parse(r#"Digest realm="x", nonce="y""#), None);
    assert_eq!(parse("garbage ,,, ="), None);
    assert_eq!(parse(r#"Bearer service="no realm""#), None);
}

#[test]
fn hosts_for_words() {
    assert_eq!(
        host_of("https://u:p@auth.example:8443/token?x=1"),
        "auth.example:8443"
    );
    assert_eq!(host_of("auth.example"), "auth.example");
}
