//! Label selector matching, as the API server defines it, for pool membership; and the
//! checks `metav1.LabelSelectorAsSelector` makes, since MCO places no node at all while a pool's
//! selector fails them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::core::node::NodeMeta;

/// Something with labels to match: a node (the policy's, or recovery's).
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
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

/// What `metav1.LabelSelectorAsSelector` makes of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// No requirements: MCO's pools then select nothing (`selector.Empty()`).
    Empty,
    Valid,
    /// A requirement it refuses, with the reason.
    Invalid(InvalidRequirement),
}

/// A requirement of a selector that `metav1.LabelSelectorAsSelector` refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRequirement {
    #[error("invalid label key {0:?}")]
    Key(String),
    #[error("invalid label value {0:?}")]
    Value(String),
    #[error("operator {operator:?} on {key:?} {problem}")]
    Operator {
        operator: String,
        key: String,
        problem: OperatorProblem,
    },
}

/// What is wrong with a requirement's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OperatorProblem {
    /// `In`/`NotIn` without values.
    #[error("needs at least one value")]
    NoValues,
    /// `Exists`/`DoesNotExist` with values.
    #[error("takes no values")]
    Values,
    #[error("is not a known operator")]
    Unknown,
}

/// Checks a selector as `metav1.LabelSelectorAsSelector` does.
pub fn check(selector: &LabelSelector) -> Validity {
    for (key, value) in selector.match_labels.iter().flatten() {
        if let Err(e) = valid_key(key).and_then(|()| valid_value(value)) {
            return Validity::Invalid(e);
        }
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let problem = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => Some(OperatorProblem::NoValues),
            "Exists" | "DoesNotExist" if !values.is_empty() => Some(OperatorProblem::Values),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
            _ => Some(OperatorProblem::Unknown),
        };
        if let Some(problem) = problem {
            return Validity::Invalid(InvalidRequirement::Operator {
                operator: e.operator.clone(),
                key: e.key.clone(),
                problem,
            });
        }
        if let Err(err) =
            valid_key(&e.key).and_then(|()| values.iter().try_for_each(|v| valid_value(v)))
        {
            return Validity::Invalid(err);
        }
    }
    match keys(selector).next() {
        Some(_) => Validity::Valid,
        None => Validity::Empty,
    }
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of 1 to 63 characters.
fn valid_key(key: &str) -> Result<(), InvalidRequirement> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    if prefix_ok && !name.is_empty() && name_like(name) {
        Ok(())
    } else {
        Err(InvalidRequirement::Key(key.to_string()))
    }
}

/// A label value: empty, or 1 to 63 characters as a key's name part.
fn valid_value(value: &str) -> Result<(), InvalidRequirement> {
    if value.is_empty() || name_like(value) {
        Ok(())
    } else {
        Err(InvalidRequirement::Value(value.to_string()))
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn name_like(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    s.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
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
mod tests;
