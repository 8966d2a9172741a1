use super::*;

const HEX: &str = "01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930";

#[test]
fn same_image_in_different_spellings() {
    let repo = "quay.io/openshift/ocb-image";
    let cases = [
        (
            format!("{repo}@sha256:{HEX}"),
            format!("{repo}:latest@sha256:{HEX}"),
            true,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("{repo}@sha256:{}", HEX.to_uppercase()),
            true,
        ),
        (
            "ubuntu@sha256:".to_string() + HEX,
            format!("docker.io/library/ubuntu@sha256:{HEX}"),
            true,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("quay.io/openshift/other@sha256:{HEX}"),
            false,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("registry.example.com/openshift/ocb-image@sha256:{HEX}"),
            false,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("QUAY.io/openshift/ocb-image@sha256:{HEX}"),
            true,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("quay.io:443/openshift/ocb-image@sha256:{HEX}"),
            true,
        ),
        (
            format!("{repo}@sha256:{HEX}"),
            format!("quay.io:5000/openshift/ocb-image@sha256:{HEX}"),
            false,
        ),
        (format!("{repo}:a"), format!("{repo}:b"), false),
        (format!("{repo}:a"), format!("{repo}@sha256:{HEX}"), false),
        ("not a ref".to_string(), " not a ref ".to_string(), true),
    ];
    for (a, b, same) in cases {
        assert_eq!(
            ImageKey::parse(&a) == ImageKey::parse(&b),
            same,
            "{a} vs {b}"
        );
    }
}

#[test]
fn repository_ignores_tag_and_digest() {
    let a = repo_of("image-registry.openshift-image-registry.svc:5000/ns/ocb-image:latest");
    let b = repo_of(&format!(
        "image-registry.openshift-image-registry.svc:5000/ns/ocb-image@sha256:{HEX}"
    ));
    assert!(a.is_some());
    assert_eq!(a, b);
    assert_eq!(repo_of("Not Valid"), None);
}

#[test]
fn digests_in_any_spelling() {
    let upper = HEX.to_uppercase();
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            format!("quay.io/x/ocb@sha256:{HEX}"),
            vec![format!("sha256:{HEX}")],
        ),
        (
            format!("QUAY.io/x/ocb:latest@SHA256:{upper}"),
            vec![format!("sha256:{HEX}")],
        ),
        (
            format!("sha256:{HEX} and again sha256:{HEX}"),
            vec![format!("sha256:{HEX}")],
        ),
        (format!("sha256:{}", &HEX[..63]), vec![]),
        (format!("sha256:{HEX}0"), vec![]),
        ("quay.io/x/ocb:latest".to_string(), vec![]),
        (
            format!("sha512:{HEX}{HEX}"),
            vec![format!("sha512:{HEX}{HEX}")],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(digests_in(&text), want, "{text}");
    }
}

#[test]
fn abbreviation_keeps_repo_name_and_digest_prefix() {
    assert_eq!(
        abbreviate(&format!("quay.io/x/ocb-image@sha256:{HEX}")),
        ".../ocb-image@sha256:01971adebd63..."
    );
    assert_eq!(abbreviate("weird value"), "weird value");
}
