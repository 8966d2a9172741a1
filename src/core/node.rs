//! A node as the policy reads it, and nothing more: its name, its labels (pool membership,
//! `policy::pools`) and MCO's three image annotations (the node rule, `policy::scan`); a rule that
//! reads more of a node needs it added here first. A real node kept whole costs ~11 KiB; this
//! keeps ~1 KiB: the wire form ([`WireMeta`]) skips other annotations without allocating them, and
//! strings repeated across nodes are interned, so a pool of identical workers shares one copy
//! (which also lets `policy::memo` match them by address).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::core::model::node_annotations::{CURRENT_IMAGE, DESIRED_IMAGE, STATE};
use crate::core::model::trimmed;

/// The policy's node. Cheap to share (`Arc<NodeMeta>`); built from [`WireNode`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMeta {
    name: Arc<str>,
    /// Sorted by key, no duplicates.
    labels: Box<[(Arc<str>, Arc<str>)]>,
    desired: Option<Arc<str>>,
    current: Option<Arc<str>>,
    state: Option<Arc<str>>,
}

impl NodeMeta {
    /// Builds the node from its decoded metadata, keeping the labels whose key `keep_label`
    /// accepts; strings are shared through `interner`.
    pub fn from_wire(
        meta: WireMeta,
        interner: &mut Interner,
        keep_label: impl Fn(&str) -> bool,
    ) -> Self {
        let mut labels: Vec<(Arc<str>, Arc<str>)> = meta
            .labels
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| keep_label(k))
            .map(|(k, v)| (interner.intern(&k), interner.intern(&v)))
            .collect();
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        let images = meta.annotations.unwrap_or_default();
        let name = interner.intern(meta.name.as_deref().unwrap_or_default());
        let mut intern = |s: Option<String>| s.map(|s| interner.intern(&s));
        NodeMeta {
            name,
            labels: labels.into_boxed_slice(),
            desired: intern(images.desired),
            current: intern(images.current),
            state: intern(images.state),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared (what the node cache and index key on).
    pub fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// A label's value as written (possibly empty).
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_ref())
    }

    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// The desired image annotation as written.
    pub fn desired_image(&self) -> Option<&str> {
        self.desired.as_deref()
    }

    /// The current image annotation as written.
    pub fn current_image(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// The MCO state annotation as written.
    pub fn state(&self) -> Option<&str> {
        self.state.as_deref()
    }
}

/// Fixtures, must-gather files and `serve --from-dir` decode a node the way the API server
/// sends one (`{"metadata": {...}}`), without sharing strings across nodes.
impl<'de> Deserialize<'de> for NodeMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(deserializer)?;
        Ok(NodeMeta::from_wire(
            wire.metadata,
            &mut Interner::default(),
            |_| true,
        ))
    }
}

/// Written back as the same shape, with only what it keeps (for `check --json` style output
/// and tests).
impl Serialize for NodeMeta {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let annotations: BTreeMap<&str, &str> = [
            (DESIRED_IMAGE, self.desired_image()),
            (CURRENT_IMAGE, self.current_image()),
            (STATE, self.state()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
        let labels: BTreeMap<&str, &str> = self.labels().collect();
        serde_json::json!({"metadata": {
            "name": self.name(),
            "labels": labels,
            "annotations": annotations,
        }})
        .serialize(serializer)
    }
}

/// The image annotations MCO writes on a node, trimmed; empty values count as absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeImages<'a> {
    pub desired: Option<&'a str>,
    pub current: Option<&'a str>,
    pub state: Option<&'a str>,
}

impl<'a> NodeImages<'a> {
    pub fn of(node: &'a NodeMeta) -> Self {
        NodeImages {
            desired: trimmed(node.desired_image()),
            current: trimmed(node.current_image()),
            state: trimmed(node.state()),
        }
    }

    /// Whether the node runs its desired image, as MCO's daemon tests it: the two annotations
    /// are the same string (one spelled differently is rebased to, and pulled, again).
    pub fn reached(&self) -> bool {
        self.desired.is_some() && self.desired == self.current
    }
}

/// A Node (or PartialObjectMetadata of one) as the API server sends it, decoded lean.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WireNode {
    #[serde(default)]
    pub metadata: WireMeta,
}

/// The metadata fields a node is built from; every other field is skipped.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireMeta {
    pub name: Option<String>,
    pub resource_version: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<ImageAnnotations>,
}

impl WireMeta {
    /// The resourceVersion as etcd's revision number, when it is one.
    pub fn revision(&self) -> Option<u64> {
        self.resource_version.as_deref()?.trim().parse().ok()
    }
}

/// The three annotations MCO writes on a node; the decoder skips every other annotation
/// without allocating it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageAnnotations {
    pub desired: Option<String>,
    pub current: Option<String>,
    pub state: Option<String>,
}

impl<'de> Deserialize<'de> for ImageAnnotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Annotations;
        impl<'de> Visitor<'de> for Annotations {
            type Value = ImageAnnotations;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = ImageAnnotations::default();
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let slot = match key.as_ref() {
                        DESIRED_IMAGE => &mut out.desired,
                        CURRENT_IMAGE => &mut out.current,
                        STATE => &mut out.state,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<String>()?);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(Annotations)
    }
}

/// A map key, borrowed from the input when it can be (most annotation keys are skipped).
#[derive(Deserialize)]
#[serde(transparent)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

/// Shares equal strings: a string interned twice is stored once. Strings no node holds any
/// more are dropped by [`Interner::purge`].
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
}

impl Interner {
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(s);
        self.strings.insert(Arc::clone(&shared));
        shared
    }

    /// Forgets the strings only the interner still holds.
    pub fn purge(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
    }
}

#[cfg(test)]
mod tests;
