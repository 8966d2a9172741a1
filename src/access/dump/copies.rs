//! Copies of one object in a dump, reconciled: the larger numeric resourceVersion wins; copies
//! without one, or equal, that disagree are all kept, and the verdict is the most cautious over them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::skipped::Skipped;

/// A decoded object ready to keep.
pub(super) struct Decoded<T> {
    pub(super) name: String,
    pub(super) resource_version: Option<u64>,
    /// What the policy reads of it, to tell copies that disagree from copies that do not.
    pub(super) content: Value,
    pub(super) object: T,
}

/// The copies kept of one object: the winner so far, or several that disagree.
pub(super) struct Copies<T> {
    pub(super) resource_version: Option<u64>,
    /// Distinct by content, the copy read last first.
    pub(super) objects: Vec<(Value, Arc<T>)>,
}

/// Objects of one kind by name. Of two copies with numeric resourceVersions the larger wins;
/// where either has none, or they are equal, copies that disagree are all kept, and the
/// verdict is the most cautious over them ([`Objects::into_snapshots`]).
pub(super) struct Kept<T>(pub(super) BTreeMap<String, Copies<T>>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(BTreeMap::new())
    }
}

impl<T> Kept<T> {
    pub(super) fn add(&mut self, kind: &str, decoded: Decoded<T>) -> Result<(), Skipped> {
        if decoded.name.is_empty() {
            return Err(Skipped::NoName {
                kind: kind.to_string(),
            });
        }
        let new = (decoded.content, Arc::new(decoded.object));
        // A first copy meets an empty entry of its own resourceVersion: the last arm keeps it.
        let kept = self.0.entry(decoded.name).or_insert(Copies {
            resource_version: decoded.resource_version,
            objects: Vec::new(),
        });
        match (kept.resource_version, decoded.resource_version) {
            (Some(old), Some(rv)) if old > rv => {}
            (Some(old), Some(rv)) if old < rv => {
                kept.resource_version = Some(rv);
                kept.objects = vec![new];
            }
            _ => {
                kept.resource_version = kept.resource_version.max(decoded.resource_version);
                kept.objects.retain(|(content, _)| *content != new.0);
                kept.objects.insert(0, new);
            }
        }
        Ok(())
    }

    pub(super) fn choices(&self) -> usize {
        self.0.values().map(|c| c.objects.len()).product()
    }

    pub(super) fn disagreeing(&self, kind: &str, out: &mut Vec<String>) {
        out.extend(
            self.0
                .iter()
                .filter(|(_, c)| c.objects.len() > 1)
                .map(|(name, _)| format!("{kind}/{name}")),
        );
    }

    /// One copy of each object, sorted by name: combination `i` (mixed radix over the
    /// objects with several copies; `i` keeps the rest for the next kind).
    pub(super) fn pick(&self, i: &mut usize) -> Vec<Arc<T>> {
        self.0
            .values()
            .map(|c| {
                let n = c.objects.len();
                let choice = *i % n;
                *i /= n;
                Arc::clone(&c.objects[choice].1)
            })
            .collect()
    }
}

impl<T: Serialize> Decoded<T> {
    pub(super) fn new(name: String, resource_version: Option<u64>, object: T) -> Self {
        Decoded {
            name,
            resource_version,
            content: content_of(&object),
            object,
        }
    }
}

/// The object as the model keeps it, without the metadata that differs between copies of one
/// state (resourceVersion, managedFields are not kept; generation and timestamps are dropped).
fn content_of<T: Serialize>(object: &T) -> Value {
    let mut v = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(Value::Object(meta)) = v.get_mut("metadata") {
        for key in [
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(key);
        }
    }
    v
}
