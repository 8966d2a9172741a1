//! What the index-driven decision relies on: candidates, shared strings, the memo.

use std::collections::{BTreeSet, HashMap};

use super::pool_rule::between_batches;
use super::*;
use crate::core::image::ImageKey;
use crate::core::node::NodeMeta;

/// The scan keys its memo on string identity: nodes built through one interner (as the node
/// cache builds them) share their image strings, and more distinct pairs than the memo holds
/// evict each other. The verdict must still be each node's own.
#[test]
fn shared_image_strings_and_a_full_memo_give_each_node_its_own_verdict() {
    use crate::core::node::{Interner, WireNode};
    let hexes: Vec<String> = (0..6).map(|i| format!("{i:x}").repeat(64)).collect();
    let mut interner = Interner::default();
    let mut nodes = Vec::new();
    let mut want = Vec::new();
    for i in 0..60 {
        let (d, c) = (&hexes[i % 6], &hexes[(i / 6) % 6]);
        let name = format!("node-{i:02}");
        let wire: WireNode = serde_json::from_value(node(
            &name,
            &["infra"],
            Some(&img(d)),
            Some(&img(c)),
            "Working",
        ))
        .expect("fixture decodes");
        nodes.push(Arc::new(NodeMeta::from_wire(
            wire.metadata,
            &mut interner,
            |_| true,
        )));
        // The config's builds are hexes 0 to 2: a node blocks while its desired image is
        // one of them and its current image differs.
        if i % 6 < 3 && d != c {
            want.push(name);
        }
    }
    let mut snap = Cluster::report().snapshot();
    snap.machine_os_builds = arcs(&[
        mosb("worker-0", "worker", &hexes[0]),
        mosb("worker-1", "worker", &hexes[1]),
        mosb("worker-2", "worker", &hexes[2]),
    ]);
    snap.machine_os_configs = arcs(&[mosc("worker", None)]);
    snap.nodes = nodes;
    let mosc = snap.machine_os_config("worker").expect("worker");
    let v = evaluate(&snap, Deletion::MachineOSConfig(mosc), PolicyMode::InFlight);
    assert_eq!(blocking_names(&v), want);
    for b in &v.blocking {
        let i: usize = b.node["node-".len()..].parse().expect("index");
        assert_eq!(
            b.desired_image.as_deref(),
            Some(img(&hexes[i % 6]).as_str())
        );
    }
}

/// A denial decided from the index's candidates: the same blocking nodes as the full scan, the
/// rolling pool named without a count; nothing when no candidate blocks by itself.
#[test]
fn a_blocking_candidate_decides_a_denial_without_every_node() {
    let snap = Cluster::report().snapshot();
    let mosc = snap.machine_os_config("worker").expect("worker");
    let target = Deletion::MachineOSConfig(mosc);
    let full = evaluate(&snap, target, PolicyMode::InFlight);
    assert_eq!(
        guarded_digests(&snap, target),
        None,
        "the pool rule needs every node"
    );
    assert_eq!(
        blocking_digests(&snap, target),
        Some([NEW.to_string()].into())
    );
    // Only the rolling node carries the digest: the index names it alone.
    let mut candidates = snap.clone();
    candidates.nodes.retain(|n| n.name() == NODE);
    let v = evaluate_blocked(&candidates, target, PolicyMode::InFlight).expect("blocked");
    assert_eq!(v.blocking, full.blocking);
    assert!(!v.allowed);
    assert_eq!(full.rolling[0].pending_nodes, Some(2));
    assert_eq!(v.rolling.len(), 1);
    assert_eq!(v.rolling[0].pending_nodes, None);
    let msg = message::denial(&v);
    assert!(
        msg.contains("pool worker is rolling out .../ocb-image@sha256:01971adebd63...; MCO updates its nodes one after another"),
        "{msg}"
    );
    // Between two nodes nothing blocks by itself: only the full scan decides.
    let between = between_batches(true, false);
    let mosc = between.machine_os_config("worker").expect("worker");
    let mut candidates = between.clone();
    candidates.nodes.clear();
    assert_eq!(
        evaluate_blocked(
            &candidates,
            Deletion::MachineOSConfig(mosc),
            PolicyMode::InFlight
        ),
        None
    );
}

// The index itself: how it files nodes, and that it never hides a blocking node.

const A_IMG: &str =
    "quay.io/x/ocb-image@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B_IMG: &str =
    "quay.io/x/ocb-image@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn indexed(name: &str, desired: Option<&str>, current: Option<&str>) -> NodeMeta {
    let mut ann = serde_json::Map::new();
    if let Some(d) = desired {
        ann.insert(node_annotations::DESIRED_IMAGE.into(), json!(d));
    }
    if let Some(c) = current {
        ann.insert(node_annotations::CURRENT_IMAGE.into(), json!(c));
    }
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": ann}})).expect("node")
}

fn names(v: BTreeSet<Arc<str>>) -> Vec<String> {
    v.into_iter().map(|n| n.to_string()).collect()
}

fn digests(specs: &[&str]) -> BTreeSet<String> {
    specs
        .iter()
        .filter_map(|s| ImageKey::parse(s).digest_hex().map(str::to_string))
        .collect()
}

#[test]
fn only_unreached_nodes_are_in_flight_candidates() {
    let mut idx = NodeIndex::default();
    idx.upsert(&indexed("rolling", Some(A_IMG), Some(B_IMG)));
    idx.upsert(&indexed("settled", Some(A_IMG), Some(A_IMG)));
    idx.upsert(&indexed(
        "respelled",
        Some(A_IMG),
        Some(&A_IMG.replace("@", ":t@")),
    ));
    idx.upsert(&indexed("plain", None, None));
    // A_IMG current image spelled otherwise has not reached the desired one (MCO compares
    // strings): the daemon rebases, and pulls, again.
    assert_eq!(
        names(idx.candidates(&digests(&[A_IMG]), PolicyMode::InFlight)),
        ["respelled", "rolling"]
    );
    assert_eq!(
        names(idx.candidates(&digests(&[A_IMG]), PolicyMode::InUse)),
        ["respelled", "rolling", "settled"]
    );
    assert_eq!(
        names(idx.candidates(&digests(&[B_IMG]), PolicyMode::InUse)),
        ["rolling"]
    );
    assert_eq!(idx.len(), 3, "nodes without images are not kept");
}

#[test]
fn updates_move_and_removal_forgets() {
    let mut idx = NodeIndex::default();
    idx.upsert(&indexed("n", Some(A_IMG), None));
    assert_eq!(
        names(idx.candidates(&digests(&[A_IMG]), PolicyMode::InFlight)),
        ["n"]
    );
    idx.upsert(&indexed("n", Some(A_IMG), Some(A_IMG)));
    assert!(
        idx.candidates(&digests(&[A_IMG]), PolicyMode::InFlight)
            .is_empty()
    );
    idx.upsert(&indexed("n", Some(B_IMG), Some(A_IMG)));
    assert_eq!(
        names(idx.candidates(&digests(&[B_IMG]), PolicyMode::InFlight)),
        ["n"]
    );
    idx.remove("n");
    assert!(idx.is_empty());
    assert!(
        idx.candidates(&digests(&[A_IMG, B_IMG]), PolicyMode::InUse)
            .is_empty()
    );
}

#[test]
fn unparseable_images_are_always_candidates() {
    let mut idx = NodeIndex::default();
    idx.upsert(&indexed("odd", Some("Not A_IMG Ref"), None));
    assert_eq!(
        names(idx.candidates(&digests(&[A_IMG]), PolicyMode::InFlight)),
        ["odd"]
    );
    assert_eq!(
        names(idx.candidates(&BTreeSet::new(), PolicyMode::InFlight)),
        ["odd"]
    );
}

#[test]
fn unreached_holds_every_node_short_of_its_desired_image_once() {
    let mut idx = NodeIndex::default();
    idx.upsert(&indexed("rolling", Some(A_IMG), Some(B_IMG)));
    idx.upsert(&indexed("first", Some(A_IMG), None));
    idx.upsert(&indexed("settled", Some(A_IMG), Some(A_IMG)));
    idx.upsert(&indexed("odd", Some(A_IMG), Some("Not A_IMG Ref")));
    idx.upsert(&indexed("odder", Some("Not A_IMG Ref"), None));
    let unreached: Vec<&str> = idx.unreached().into_iter().map(|n| n.as_ref()).collect();
    assert_eq!(unreached, ["first", "odd", "odder", "rolling"]);
}

/// The index must never hide a blocking node: for every target and mode, the verdict
/// over the index's candidates equals the verdict over all nodes.
#[test]
fn verdicts_from_candidates_equal_verdicts_from_all_nodes() {
    let a_hex = &A_IMG[A_IMG.len() - 64..];
    let spellings = [
        A_IMG.to_string(),
        A_IMG.replace('@', ":worker-1@"),
        format!("quay.io/x/ocb-image@sha256:{}", a_hex.to_uppercase()),
        format!("  {A_IMG} "),
        B_IMG.to_string(),
        "Not A_IMG Ref".to_string(),
        "quay.io/x/ocb-image:latest".to_string(),
    ];
    let mut nodes = Vec::new();
    for (i, d) in spellings.iter().enumerate() {
        for (j, c) in spellings.iter().enumerate() {
            nodes.push(indexed(&format!("n{i}-{j}"), Some(d), Some(c)));
        }
        nodes.push(indexed(&format!("n{i}-none"), Some(d), None));
        nodes.push(indexed(&format!("none-{i}"), None, Some(d)));
    }
    let mosc = |name: &str,
                current: Option<&str>,
                built: bool|
     -> Arc<crate::core::model::MachineOSConfig> {
        let mut v = json!({
            "metadata": {"name": name},
            "spec": {"renderedImagePushSpec": "quay.io/x/ocb-image:latest"},
            "status": {"currentImagePullSpec": current}
        });
        if built {
            v["metadata"]["annotations"] =
                json!({"machineconfiguration.openshift.io/current-machine-os-build": "gone"});
        }
        Arc::new(serde_json::from_value(v).expect("mosc"))
    };
    let mosb = |name: &str, image: &str| -> Arc<crate::core::model::MachineOSBuild> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {crate::core::model::LABEL_MACHINE_OS_CONFIG: "with-builds"}},
                "status": {"digestedImagePushSpec": image}
            }))
            .expect("mosb"),
        )
    };
    let snapshot = Snapshot {
        machine_os_configs: vec![
            mosc("with-builds", Some(A_IMG), false),
            mosc("builds-gone", None, true),
            mosc("tag-only", Some("quay.io/x/ocb-image:latest"), false),
        ],
        machine_os_builds: vec![mosb("b-a", A_IMG), mosb("b-b", B_IMG)],
        pools: vec![],
        nodes: nodes.iter().cloned().map(Arc::new).collect(),
        ..Default::default()
    };
    let mut idx = NodeIndex::default();
    nodes.iter().for_each(|n| idx.upsert(n));
    let by_name: HashMap<String, Arc<NodeMeta>> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name().to_string(), Arc::clone(n)))
        .collect();
    let targets: Vec<Deletion<'_>> = snapshot
        .machine_os_configs
        .iter()
        .map(|m| Deletion::MachineOSConfig(m))
        .chain(
            snapshot
                .machine_os_builds
                .iter()
                .map(|b| Deletion::MachineOSBuild(b)),
        )
        .collect();
    for target in targets {
        for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
            let full = evaluate(&snapshot, target, mode);
            let narrowed = match guarded_digests(&snapshot, target) {
                Some(d) => Snapshot {
                    nodes: idx
                        .candidates(&d, mode)
                        .iter()
                        .map(|n| Arc::clone(&by_name[n.as_ref()]))
                        .collect(),
                    ..snapshot.clone()
                },
                None => snapshot.clone(),
            };
            let indexed = evaluate(&narrowed, target, mode);
            assert_eq!(full, indexed, "{target:?} {mode}");
            assert!(
                !full.blocking.is_empty() || full.images.is_empty() || mode == PolicyMode::InFlight,
                "fixture exercises blocking: {target:?}"
            );
        }
    }
}
