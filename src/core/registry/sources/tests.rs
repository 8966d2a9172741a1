use super::*;

const D: &str = "sha256:01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930";

fn rule(source: &str, mirrors: &[&str], never: bool) -> MirrorRule {
    MirrorRule {
        source: source.into(),
        mirrors: mirrors.iter().map(|m| m.to_string()).collect(),
        never_contact_source: never,
    }
}

fn specs(image: &str, rules: &[MirrorRule]) -> Vec<String> {
    pull_sources(image, rules)
        .expect("parses")
        .iter()
        .map(PullSource::spec)
        .collect()
}

#[test]
fn the_table() {
    let image = format!("quay.example/ocb/os-image@{D}");
    let cases: Vec<(&str, Vec<MirrorRule>, Vec<String>)> = vec![
        ("no rule: the source", vec![], vec![image.clone()]),
        (
            "a repository rule: mirrors in order, then the source",
            vec![rule(
                "quay.example/ocb/os-image",
                &["m1.example/ocb/os-image", "m2.example:5000/x/os"],
                false,
            )],
            vec![
                format!("m1.example/ocb/os-image@{D}"),
                format!("m2.example:5000/x/os@{D}"),
                image.clone(),
            ],
        ),
        (
            "a namespace rule appends the rest",
            vec![rule(
                "quay.example/ocb",
                &["mirror.example/mirrored"],
                false,
            )],
            vec![
                format!("mirror.example/mirrored/os-image@{D}"),
                image.clone(),
            ],
        ),
        (
            "NeverContactSource: the mirrors only",
            vec![rule("quay.example/ocb", &["mirror.example/ocb"], true)],
            vec![format!("mirror.example/ocb/os-image@{D}")],
        ),
        (
            "the most specific rule wins",
            vec![
                rule("quay.example", &["wide.example"], false),
                rule("quay.example/ocb/os-image", &["narrow.example/os"], false),
            ],
            vec![format!("narrow.example/os@{D}"), image.clone()],
        ),
        (
            "a prefix is not a path prefix",
            vec![rule("quay.example/oc", &["mirror.example/oc"], false)],
            vec![image.clone()],
        ),
        (
            "a host rule",
            vec![rule("quay.example", &["mirror.example:8443"], false)],
            vec![
                format!("mirror.example:8443/ocb/os-image@{D}"),
                image.clone(),
            ],
        ),
        (
            "a wildcard rule",
            vec![rule("*.example", &["mirror.internal/all"], false)],
            vec![
                format!("mirror.internal/all/ocb/os-image@{D}"),
                image.clone(),
            ],
        ),
        (
            "a wildcard does not match the bare domain",
            vec![rule("*.quay.example", &["mirror.internal"], false)],
            vec![image.clone()],
        ),
    ];
    for (name, rules, want) in cases {
        assert_eq!(specs(&image, &rules), want, "{name}");
    }
}

#[test]
fn a_tag_uses_the_source_only() {
    let rules = [rule("quay.example/ocb", &["mirror.example/ocb"], true)];
    assert_eq!(
        specs("quay.example/ocb/os-image:latest", &rules),
        vec!["quay.example/ocb/os-image:latest".to_string()]
    );
}

#[test]
fn merged_sets() {
    let merged = merge(vec![
        rule(
            "quay.example/ocb",
            &["a.example/ocb", "b.example/ocb"],
            false,
        ),
        rule(
            " quay.example/ocb ",
            &["b.example/ocb", "c.example/ocb"],
            true,
        ),
        rule("", &["x"], false),
    ]);
    assert_eq!(
        merged,
        vec![rule(
            "quay.example/ocb",
            &["a.example/ocb", "b.example/ocb", "c.example/ocb"],
            true
        )]
    );
}

#[test]
fn an_unparseable_image_is_an_error() {
    assert!(pull_sources("not a reference!", &[]).is_err());
}
