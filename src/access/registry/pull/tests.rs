use super::*;
use serde_json::json;

#[test]
fn both_kinds_merge() {
    let idms = json!({"spec": {"imageDigestMirrors": [
        {"source": "quay.example/ocb", "mirrors": ["m1.example/ocb"], "mirrorSourcePolicy": "NeverContactSource"}
    ]}});
    let icsp = json!({"spec": {"repositoryDigestMirrors": [
        {"source": "quay.example/ocb", "mirrors": ["m2.example/ocb"]},
        {"source": "other.example", "mirrors": []}
    ]}});
    let rules = mirror_rules([
        ("ImageDigestMirrorSet", &idms),
        ("ImageContentSourcePolicy", &icsp),
    ]);
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].mirrors, vec!["m1.example/ocb", "m2.example/ocb"]);
    assert!(rules[0].never_contact_source);
    assert!(rules[1].mirrors.is_empty());
}
