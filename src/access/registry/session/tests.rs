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
