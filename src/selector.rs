//! Label selector matching, as the API server defines it, for pool membership.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::model::NodeMeta;

/// Something with labels to match: a node, or a plain map.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for NodeMeta {
    fn label(&self, key: &str) -> Option<&str> {
        NodeMeta::label(self, key)
    }
}

/// True when `labels` satisfy `selector`. An empty selector matches everything;
/// an operator we do not know matches nothing (never guess membership).
pub fn matches<L: Labels + ?Sized>(selector: &LabelSelector, labels: &L) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.label(k) == Some(v.as_str()));
    by_labels
        && selector.match_expressions.iter().flatten().all(|e| {
            let value = labels.label(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
                "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// The label keys `selector` reads: a node's other labels cannot change whether it matches.
pub fn keys(selector: &LabelSelector) -> impl Iterator<Item = &str> {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str());
    let by_expressions = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| e.key.as_str());
    by_labels.chain(by_expressions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

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
}
