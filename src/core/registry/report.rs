//! The words and numbers of registry truth: `mosc-guard images`' text and JSON, whether it
//! passes (its exit status), and the per-pool counts `serve` exports.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::answer::{Answer, Status};
use super::needed::{Holder, Need, NeededImage};
use crate::core::image::abbreviate;

/// One image, who needs it, and what the places a node pulls it from answered.
#[derive(Clone, Debug)]
pub struct CheckedImage {
    pub needed: NeededImage,
    /// What the places together came to.
    pub verdict: Answer,
    /// Each place asked (`host/repository@digest`), in the node's order, and its answer.
    pub places: Vec<(String, Answer)>,
}

/// Whether `images` passes: every image a node or a MachineOSConfig needs is available.
/// Images only old builds carry do not count.
pub fn passes(images: &[CheckedImage]) -> bool {
    images
        .iter()
        .filter(|i| i.needed.counts())
        .all(|i| i.verdict.status == Status::Available)
}

fn holder_json(h: &Holder) -> Value {
    match h {
        Holder::Node { node, pool, need } => {
            json!({"node": node.as_ref(), "pool": pool.as_deref(), "need": need.label()})
        }
        Holder::MachineOSConfig { name, pool, need } => {
            json!({"machineOSConfig": name, "pool": pool, "need": need.label()})
        }
        Holder::MachineOSBuild { name } => json!({"machineOSBuild": name}),
    }
}

/// `images --output json`: `{"images": [{image, status, why, counts, need, neededBy, places}],
/// "notes": [...]}`.
pub fn json(images: &[CheckedImage], notes: &[String]) -> Value {
    let images: Vec<Value> = images
        .iter()
        .map(|i| {
            json!({
                "image": i.needed.image,
                "status": i.verdict.status,
                "why": i.verdict.why,
                "counts": i.needed.counts(),
                "need": i.needed.need().map(Need::label),
                "neededBy": i.needed.needed_by.iter().map(holder_json).collect::<Vec<_>>(),
                "places": i.places.iter().map(|(place, v)| json!({
                    "pullSpec": place, "status": v.status, "why": v.why,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"images": images, "notes": notes})
}

/// Who needs an image, in a few words: `pending on w1, w2 (+3); running on 40 nodes; config
/// worker; build worker-1`.
pub fn who(needed: &NeededImage) -> String {
    let mut pending = Vec::new();
    let mut running = 0usize;
    let mut parts = Vec::new();
    for h in &needed.needed_by {
        match h {
            Holder::Node {
                node,
                need: Need::Pending,
                ..
            } => pending.push(node.as_ref()),
            Holder::Node { .. } => running += 1,
            Holder::MachineOSConfig { name, .. } => parts.push(format!("MachineOSConfig {name}")),
            Holder::MachineOSBuild { name } => parts.push(format!("MachineOSBuild {name}")),
        }
    }
    let mut out = Vec::new();
    if !pending.is_empty() {
        let shown: Vec<&str> = pending.iter().take(3).copied().collect();
        let more = match pending.len().saturating_sub(shown.len()) {
            0 => String::new(),
            more => format!(" (+{more})"),
        };
        out.push(format!("about to be pulled by {}{more}", shown.join(", ")));
    }
    if running > 0 {
        let s = if running == 1 { "" } else { "s" };
        out.push(format!("run by {running} node{s}"));
    }
    out.extend(parts);
    out.join("; ")
}

/// `images`' text: one block per image, the ones that count first.
pub fn text(images: &[CheckedImage]) -> String {
    let mut out = String::new();
    let mut sorted: Vec<&CheckedImage> = images.iter().collect();
    sorted.sort_by_key(|i| (!i.needed.counts(), std::cmp::Reverse(i.needed.need())));
    for i in sorted {
        let status = i.verdict.status.label().to_uppercase();
        out.push_str(&format!("{status:<9} {}\n", i.needed.image));
        out.push_str(&format!("          needed: {}\n", who(&i.needed)));
        if !i.needed.counts() {
            out.push_str("          (an older build's image: does not change the exit status)\n");
        }
        out.push_str(&format!("          why: {}\n", i.verdict.why));
    }
    let counted = images.iter().filter(|i| i.needed.counts()).count();
    let bad = images
        .iter()
        .filter(|i| i.needed.counts() && i.verdict.status != Status::Available)
        .count();
    out.push_str(&format!(
        "{counted} image(s) needed by nodes or MachineOSConfigs, {bad} not known to be served; {} image(s) of older builds\n",
        images.len() - counted
    ));
    out
}

/// The gauges' numbers: per (pool, need, status) the count of distinct images, for every
/// pool in `pools` (zero when none), status `missing` and `unknown` only.
pub fn pool_counts<'a>(
    pools: impl IntoIterator<Item = &'a str>,
    images: impl IntoIterator<Item = (&'a NeededImage, Status)>,
) -> BTreeMap<(String, Need, Status), usize> {
    let mut counts = BTreeMap::new();
    for pool in pools {
        for need in [Need::Pending, Need::Running] {
            for status in [Status::Missing, Status::Unknown] {
                counts.insert((pool.to_string(), need, status), 0);
            }
        }
    }
    for (image, status) in images {
        if status == Status::Available {
            continue;
        }
        for (pool, need) in image.pools() {
            *counts.entry((pool.to_string(), need, status)).or_default() += 1;
        }
    }
    counts
}

/// What the registry answered for one image `check` protects.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProtectedImage {
    pub image: String,
    pub status: Status,
    pub why: String,
}

/// `check`'s words for a protected image the registry says is already gone.
pub fn already_missing(served: &ProtectedImage) -> String {
    format!(
        "image {} is already gone from its registry ({}): deleting cannot lose it any more, \
         and a node that still needs it will fail; `mosc-guard images` names who needs it, \
         `mosc-guard recover` heals a node that failed",
        abbreviate(&served.image),
        served.why
    )
}

/// A short line for an Event or a log: `image .../os@sha256:0123... is missing (why)`.
pub fn one_line(image: &str, verdict: &Answer) -> String {
    format!(
        "image {} is {}: {}",
        abbreviate(image),
        verdict.status,
        verdict.why
    )
}

#[cfg(test)]
mod tests;
