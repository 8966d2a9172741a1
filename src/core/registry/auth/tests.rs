use super::*;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn chooses_the_most_specific_entry() {
    let file = format!(
        r#"{{"auths": {{
                "quay.example": {{"auth": "{}"}},
                "quay.example/ocb": {{"auth": "{}"}},
                "https://legacy.example/v1/": {{"auth": "{}"}},
                "Upper.Example:5000": {{"username": "u", "password": "p:w"}},
                "token-only.example": {{"identitytoken": "x"}}
            }}}}"#,
        b64("host:h"),
        b64("ns:n"),
        b64("old:o"),
    );
    let auths = AuthFile::parse(file.as_bytes()).expect("parses");
    let user = |h: &str, r: &str| auths.lookup(h, r).map(|c| c.username.clone());
    assert_eq!(user("quay.example", "ocb/os-image"), Some("ns".into()));
    assert_eq!(user("quay.example", "other/os-image"), Some("host".into()));
    assert_eq!(user("QUAY.example", "ocbx/os"), Some("host".into()));
    assert_eq!(user("legacy.example", "a/b"), Some("old".into()));
    assert_eq!(user("upper.example:5000", "a"), Some("u".into()));
    assert_eq!(
        auths
            .lookup("upper.example:5000", "a")
            .map(Credential::password),
        Some("p:w")
    );
    assert_eq!(
        user("upper.example", "a"),
        None,
        "the port is part of the host"
    );
    assert_eq!(user("token-only.example", "a"), None);
    assert_eq!(user("elsewhere.example", "a"), None);
}

#[test]
fn the_bare_map_of_dockercfg() {
    let file = format!(r#"{{"reg.example": {{"auth": "{}"}}}}"#, b64("a:b"));
    let auths = AuthFile::parse(file.as_bytes()).expect("parses");
    assert_eq!(
        auths
            .lookup("reg.example", "x")
            .map(|c| c.username.as_str()),
        Some("a")
    );
}

#[test]
fn bad_files_are_errors_that_quote_no_secret() {
    let secret = b64("user-without-colon-SECRET");
    let bad = format!(r#"{{"auths": {{"reg.example": {{"auth": "{secret}"}}}}}}"#);
    let err = AuthFile::parse(bad.as_bytes()).expect_err("no colon");
    assert!(!err.to_string().contains("SECRET") && !err.to_string().contains(&secret));
    assert!(AuthFile::parse(b"not json").is_err());
    assert!(AuthFile::parse(br#"{"auths": {"a": 1}}"#).is_err());
    let not_b64 = br#"{"auths": {"a": {"auth": "%%%"}}}"#;
    assert_eq!(
        AuthFile::parse(not_b64),
        Err(AuthError::Entry { key: "a".into() })
    );
}

#[test]
fn debug_hides_the_password() {
    let file = format!(
        r#"{{"auths": {{"r.example": {{"auth": "{}"}}}}}}"#,
        b64("me:TOPSECRET")
    );
    let auths = AuthFile::parse(file.as_bytes()).expect("parses");
    let c = auths.lookup("r.example", "x").expect("entry");
    assert!(!format!("{auths:?} {c:?}").contains("TOPSECRET"));
}
