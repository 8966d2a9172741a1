use super::*;

#[test]
fn redaction() {
    let r = Redactor::default();
    r.remember("s3cr3t-token");
    r.remember("abc");
    let text =
        "GET https://u:p@proxy.example:3128/x failed; token s3cr3t-token; http://plain/ ok; abc";
    let clean = r.clean(text);
    assert!(
        !clean.contains("s3cr3t-token") && !clean.contains("u:p@"),
        "{clean}"
    );
    assert!(
        clean.contains("https://<redacted>@proxy.example:3128/x"),
        "{clean}"
    );
    assert!(clean.contains("http://plain/ ok; abc"), "{clean}");
}
