//! What the index-driven decision relies on: candidates, shared strings, the memo.

use super::pool_rule::between_batches;
use super::*;

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
