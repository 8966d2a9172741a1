//! A dump's documents as typed objects: each with its `apiVersion` and `kind`, the items of a
//! list (`kind: List`, `NodeList`, ...) flattened, inheriting the list's type where they lack one.

use serde_json::{Map, Value};

use super::skipped::Skipped;

/// A Kubernetes object: its `apiVersion`, `kind` and the whole object.
pub(super) struct Typed {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) object: Map<String, Value>,
}

/// Pushes the object(s) `value` holds onto `out`: itself, or the items of a list, which inherit
/// the list's `(apiVersion, kind)` when they lack their own (`NodeList` items are Nodes; at the
/// top, `inherit` is `None`). Items that are not objects are dropped and reported as one problem.
pub(super) fn flatten(
    value: Value,
    inherit: Option<(&str, &str)>,
    out: &mut Vec<Typed>,
) -> Result<(), Skipped> {
    let mut object = match value {
        Value::Object(object) => object,
        other => {
            return Err(Skipped::NotAnObject {
                found: describe(&other),
            });
        }
    };
    let field = |object: &Map<String, Value>, key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let api_version = field(&object, "apiVersion").or_else(|| inherit.map(|(v, _)| v.to_string()));
    let kind = field(&object, "kind").or_else(|| inherit.map(|(_, k)| k.to_string()));
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return Err(Skipped::NoKind);
    };
    let is_list = kind.ends_with("List")
        && matches!(object.get("items"), Some(Value::Array(_) | Value::Null));
    if !is_list {
        out.push(Typed {
            api_version,
            kind,
            object,
        });
        return Ok(());
    }
    let items = match object.remove("items") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // `kind: List` says nothing about its items; `NodeList` says they are `v1` Nodes.
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let inherit = item_kind.map(|kind| (api_version.as_str(), kind));
    let mut problems = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Err(reason) = flatten(item, inherit, out) {
            problems.push(Skipped::Item {
                list: kind.clone(),
                index: i + 1,
                reason: Box::new(reason),
            });
        }
    }
    Skipped::first_of(problems, true).map_or(Ok(()), Err)
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}
