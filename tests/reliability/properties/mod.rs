//! Property tests (proptest) of guarantees no table of hand-written cases can cover:
//!
//! - `indexed_verdict_equals_full_scan`: on random snapshots (nodes in every spelling of a few
//!   images, configs, builds, pools, an index fed with stale and vanished nodes first), the
//!   webhook's cached decision (`Engine::cached`: `guarded_digests`, the digest index's
//!   candidates, then `evaluate`, or `evaluate_blocked` on candidates when a node blocks)
//!   equals `evaluate` over every node, in both policies (a denial from candidates may name
//!   fewer pools, uncounted).
//! - `admission_reviews_never_panic`: arbitrary bytes and well-formed AdmissionReviews mutated at
//!   random (JSON values replaced, keys dropped, bytes flipped, inserted, cut) go through
//!   `admission::decode`, `classify` and the whole `Admission::review` without a panic; the
//!   response carries the request's uid, and a guarded deletion whose object does not decode is
//!   never allowed.
//! - `directory_files_never_panic`: arbitrary and mutated YAML/JSON files (objects, lists,
//!   multi-document streams) go through `dump::load_dir`, then `evaluate` and the denial text of
//!   every target found, without a panic or an error.
//! - `prune_plan_agrees_with_the_webhook`: on the same random clusters, their builds aged and
//!   ended at random, no build `prune`'s plan calls deletable is refused by `evaluate` in either
//!   policy, deletes an image a kept build carries or a config's current image; and the plan
//!   `serve`'s gauge makes from the digest index deletes the same builds.
//! - `image_identity_laws`: `same_image` is reflexive and symmetric on any text, ignores the tag
//!   once a digest is present, ignores the case of the digest hex and surrounding whitespace,
//!   tells different digests and repositories apart, and agrees with the digest the index files
//!   nodes under.
//!
//! Case counts: short by default (a few seconds under `make test`). `MOSC_GUARD_CASES_VERDICT`,
//! `MOSC_GUARD_CASES_DECODE` (admission and directory files) and `MOSC_GUARD_CASES_IMAGE`, else
//! `PROPTEST_CASES`, set them (not `PROPTEST_*` names: proptest warns about those it does not
//! know); `MOSC_GUARD_CASES_PRUNE` sets the prune property's (500 by default); `make soak`
//! runs 100,000 verdict and 1,000,000 decode cases. Each test prints
//! `property <name>: <n> cases passed`. A failure prints the shrunk input.
//!
//! One test binary: the case counts, the runner and the strategies the properties share (images,
//! nodes) are here, the JSON values and their mutations in [`mutations`], the properties in modules: [`verdict`] (the
//! indexed verdict equals the full scan), [`reviews`] (AdmissionReviews and cluster lists never
//! panic the decoder), [`files`] (nor must-gather files), [`images`] (the image identity laws).

mod files;
mod images;
mod mutations;
mod prune;
mod reviews;
mod verdict;

use mutations::*;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use mosc_guard::access::dump;
use mosc_guard::access::view::{ClusterView, Fresh, FreshNodes, StaticView};
use mosc_guard::core::finalizer;
use mosc_guard::core::image::{ImageKey, same_image};
use mosc_guard::core::message;
use mosc_guard::core::model::{
    GROUP, LABEL_MACHINE_OS_CONFIG, LABEL_TARGET_POOL, MachineConfigPool, MachineOSBuild,
    MachineOSConfig, OVERRIDE_ANNOTATION, node_annotations,
};
use mosc_guard::core::node::NodeMeta;
use mosc_guard::core::policy::NodeIndex;
use mosc_guard::core::policy::{Deletion, PolicyMode, evaluate};
use mosc_guard::core::snapshot::Snapshot;
use mosc_guard::decision::Engine;
use mosc_guard::telemetry::metrics::Metrics;
use mosc_guard::webhook::admission::{self, Admission, Classified};
use mosc_guard::webhook::answer;
use testkit::review::{Review, Target as ReviewTarget};
use testkit::view::ScriptedView;

// ---------------------------------------------------------------------------------------------
// Running a property with a configurable number of cases.

/// Cases for one property: `var`, else `PROPTEST_CASES`, else `short`.
fn cases(var: &str, short: u32) -> u32 {
    let value = std::env::var(var).ok().map(|v| (var, v)).or_else(|| {
        std::env::var("PROPTEST_CASES")
            .ok()
            .map(|v| ("PROPTEST_CASES", v))
    });
    match value {
        None => short,
        Some((name, v)) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a case count: {e}")),
    }
}

/// Runs `test` on `cases` values of `strategy`; panics with the shrunk failing input.
fn check<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = Config {
        cases,
        // Inputs are printed on failure; persisting them needs the macro's source location.
        failure_persistence: None,
        ..Config::default()
    };
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("property {name} failed: {e}");
    }
    println!(
        "property {name}: {cases} cases passed in {:.1?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// A small universe of images, spelled every way the guard must recognise (and some it must not).

/// Repositories; `ubuntu` and `docker.io/library/ubuntu` are the same one.
const REPOS: &[&str] = &[
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image",
    "quay.io/x/ocb-image",
    "quay.io/x/other",
    "ubuntu",
    "docker.io/library/ubuntu",
];

/// Digest hex values (lower case); the third differs from the second only in its last digit.
const HEXES: &[&str] = &[
    "01971adebd63a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182930",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
    "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed",
];

const TAGS: &[&str] = &["latest", "worker-1", "v4.20.0_x"];

/// Spellings, see [`Image::render`].
const SPELLINGS: u8 = 9;

/// One image reference in one spelling.
#[derive(Clone, Debug)]
struct Image {
    repo: usize,
    hex: usize,
    tag: usize,
    spelling: u8,
}

impl Image {
    fn render(&self) -> String {
        let (repo, hex, tag) = (REPOS[self.repo], HEXES[self.hex], TAGS[self.tag]);
        match self.spelling {
            0 | 1 => format!("{repo}@sha256:{hex}"),
            2 => format!("{repo}:{tag}@sha256:{hex}"),
            3 => format!("{repo}@sha256:{}", hex.to_ascii_uppercase()),
            4 => format!("  {repo}@sha256:{hex}\n"),
            5 => format!("{repo}:{tag}"),
            6 => format!("{repo}@sha512:{hex}{hex}"),
            7 => format!("{repo}@sha256:{}", &hex[..12]),
            _ => ["Not A Ref", "", "sha256:", "@@"][self.tag % 4].to_string(),
        }
    }

    /// The same image (repository and digest) in another spelling.
    fn respelled(&self, spelling: u8) -> Image {
        Image {
            spelling,
            ..self.clone()
        }
    }
}

fn image() -> impl Strategy<Value = Image> {
    (0..REPOS.len(), 0..HEXES.len(), 0..TAGS.len(), 0..SPELLINGS).prop_map(
        |(repo, hex, tag, spelling)| Image {
            repo,
            hex,
            tag,
            spelling,
        },
    )
}

fn spec() -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(0.85, image().prop_map(|i| i.render()))
}

// ---------------------------------------------------------------------------------------------
// Random snapshots for the verdict property.

const POOLS: &[&str] = &["worker", "infra", "custom", "master"];

#[derive(Clone, Debug)]
struct NodeSpec {
    desired: Option<String>,
    current: Option<String>,
    state: Option<&'static str>,
    role: &'static str,
    /// Another role, or "windows" for the OS label.
    extra: &'static str,
}

/// A node's images: independent, or the current one the same image as the desired one
/// (literally, or in another spelling), which is how settled nodes look.
fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop::option::weighted(0.85, image()),
        prop::option::weighted(0.8, image()),
        0..4u8,
        0..SPELLINGS,
        prop::sample::select(&["Done", "Working", "Degraded", " "][..]),
        prop::sample::select(POOLS),
        // A second role (a custom pool beside worker, a compact cluster's master), or a
        // Windows node (in no pool).
        prop::sample::select(&["", "", "", "worker", "infra", "custom", "windows"][..]),
    )
        .prop_map(|(desired, other, relation, spelling, state, role, extra)| {
            let current = match (&desired, relation) {
                (Some(d), 0) => Some(d.render()),
                (Some(d), 1) => Some(d.respelled(spelling).render()),
                _ => other.map(|o| o.render()),
            };
            NodeSpec {
                desired: desired.map(|d| d.render()),
                current,
                state: Some(state),
                role,
                extra,
            }
        })
}

fn node(name: &str, spec: &NodeSpec) -> NodeMeta {
    let mut annotations = serde_json::Map::new();
    if let Some(d) = &spec.desired {
        annotations.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = &spec.current {
        annotations.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    if let Some(s) = spec.state {
        annotations.insert(node_annotations::STATE.into(), json!(s));
    }
    let mut labels = serde_json::Map::new();
    labels.insert(format!("node-role.kubernetes.io/{}", spec.role), json!(""));
    let os = match spec.extra {
        "windows" => "windows",
        "" => "linux",
        role => {
            labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
            "linux"
        }
    };
    labels.insert("kubernetes.io/os".into(), json!(os));
    serde_json::from_value(json!({"metadata": {
        "name": name,
        "labels": labels,
        "annotations": annotations,
    }}))
    .expect("node fixture")
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v.clone()).expect("fixture decodes"))
}
