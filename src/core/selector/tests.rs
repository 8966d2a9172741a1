use std::collections::BTreeMap;

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }]),
        ..Default::default()
    }
}

#[test]
fn selector_semantics() {
    let worker = labels(&[("node-role.kubernetes.io/worker", "")]);
    let ml = LabelSelector {
        match_labels: Some(labels(&[("node-role.kubernetes.io/worker", "")])),
        ..Default::default()
    };
    let cases = [
        (LabelSelector::default(), true),
        (ml, true),
        (expr("node-role.kubernetes.io/worker", "Exists", &[]), true),
        (expr("node-role.kubernetes.io/infra", "Exists", &[]), false),
        (
            expr("node-role.kubernetes.io/infra", "DoesNotExist", &[]),
            true,
        ),
        (
            expr("node-role.kubernetes.io/worker", "In", &["", "x"]),
            true,
        ),
        (
            expr("node-role.kubernetes.io/worker", "NotIn", &[""]),
            false,
        ),
        (expr("node-role.kubernetes.io/worker", "Gt", &["1"]), false),
    ];
    for (i, (sel, want)) in cases.into_iter().enumerate() {
        assert_eq!(matches(&sel, &worker), want, "case {i}");
    }
}

/// Mirrors `metav1.LabelSelectorAsSelector`'s errors, and `selector.Empty()`.
#[test]
fn checked_as_label_selector_as_selector() {
    let ml = |k: &str, v: &str| LabelSelector {
        match_labels: Some(labels(&[(k, v)])),
        ..Default::default()
    };
    let cases = [
        (LabelSelector::default(), Validity::Empty),
        (
            LabelSelector {
                match_labels: Some(BTreeMap::new()),
                match_expressions: Some(vec![]),
            },
            Validity::Empty,
        ),
        (ml("node-role.kubernetes.io/worker", ""), Validity::Valid),
        (
            expr("node-role.kubernetes.io/infra", "Exists", &[]),
            Validity::Valid,
        ),
        (expr("a", "In", &["x"]), Validity::Valid),
    ];
    for (i, (sel, want)) in cases.into_iter().enumerate() {
        assert_eq!(check(&sel), want, "case {i}");
    }
    let long = "x".repeat(64);
    for (bad, reason) in [
        (
            expr("a", "Gt", &["1"]),
            r#"operator "Gt" on "a" is not a known operator"#.to_string(),
        ),
        (
            expr("a", "In", &[]),
            r#"operator "In" on "a" needs at least one value"#.to_string(),
        ),
        (
            expr("a", "Exists", &["x"]),
            r#"operator "Exists" on "a" takes no values"#.to_string(),
        ),
        (
            ml("bad key!", ""),
            r#"invalid label key "bad key!""#.to_string(),
        ),
        (ml("-a", ""), r#"invalid label key "-a""#.to_string()),
        (
            ml("a", "white space"),
            r#"invalid label value "white space""#.to_string(),
        ),
        (
            ml("Upper.Case/a", ""),
            r#"invalid label key "Upper.Case/a""#.to_string(),
        ),
        (ml(&long, ""), format!("invalid label key {long:?}")),
        (
            expr("a", "In", &["ok", "not ok"]),
            r#"invalid label value "not ok""#.to_string(),
        ),
    ] {
        match check(&bad) {
            Validity::Invalid(why) => assert_eq!(why.to_string(), reason, "{bad:?}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
