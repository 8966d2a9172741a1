//! Pools: MCO's membership decides each node's pool, `recover POOL` plans one pool, and the
//! readings of a dump whose copies disagree give the most cautious plan.

use super::*;

fn two_pools() -> Cluster {
    let mut c = Cluster::report();
    c.nodes.push(stuck("infra-0", "infra"));
    // infra nodes also carry the worker role: MCO places them in the custom pool.
    c.nodes[1]["metadata"]["labels"]["node-role.kubernetes.io/worker"] = json!("");
    c
}

#[test]
fn two_pools_are_planned_each_node_in_its_own_pool() {
    let plan = two_pools().plan(None);
    let listed: Vec<(&str, Option<&str>)> = plan
        .recoverable()
        .map(|(n, _)| (n.node.as_str(), n.pool.as_deref()))
        .collect();
    assert_eq!(listed, [("infra-0", Some("infra")), (NODE, Some("worker"))]);
}

#[test]
fn a_pool_filter_plans_that_pool_only() {
    let c = two_pools();
    let only = |pool| -> Vec<String> {
        c.plan(Some(pool))
            .nodes
            .into_iter()
            .map(|n| n.node)
            .collect()
    };
    assert_eq!(only("infra"), ["infra-0"]);
    assert_eq!(only("worker"), [NODE]);
    assert!(only("master").is_empty());
}

#[test]
fn a_mosc_on_one_pool_holds_that_pool_only() {
    let mut c = two_pools();
    c.moscs.push(mosc("infra"));
    let plan = c.plan(None);
    assert_eq!(summary(&plan.nodes[0].diagnosis), ["poolTargetedNotPaused"]);
    assert_eq!(summary(&plan.nodes[1].diagnosis), ["recoverable"]);
}

#[test]
fn plan_node_re_plans_one_node_from_a_fresh_read() {
    let c = two_pools();
    let snap = c.snapshot();
    let one = plan_node(&snap, "infra-0", &c.registry).expect("listed");
    assert_eq!(one.pool.as_deref(), Some("infra"));
    assert_eq!(summary(&one.diagnosis), ["recoverable"]);
    assert!(plan_node(&snap, "absent", &c.registry).is_none());
}

#[test]
fn disagreeing_readings_give_the_most_cautious_plan() {
    let c = two_pools();
    let plain = c.plan(None);
    assert_eq!(most_cautious(vec![plain.clone(), plain.clone()]), plain);

    // One reading has a MOSC on infra: that reading's problem decides infra-0.
    let mut targeted = two_pools();
    targeted.moscs.push(mosc("infra"));
    let merged = most_cautious(vec![plain.clone(), targeted.plan(None)]);
    assert_eq!(
        summary(&merged.nodes[0].diagnosis),
        ["poolTargetedNotPaused"]
    );
    assert_eq!(summary(&merged.nodes[1].diagnosis), ["recoverable"]);

    // Recoverable in one reading, something else in another: the copies cannot tell.
    let mut drifted = two_pools();
    annotate(&mut drifted.nodes[0], DESIRED_IMAGE, Some(&img(RAN)));
    let merged = most_cautious(vec![plain.clone(), drifted.plan(None)]);
    assert_eq!(summary(&merged.nodes[1].diagnosis), ["copiesDisagree"]);

    // Listed in one reading only.
    let mut healthy = two_pools();
    annotate(&mut healthy.nodes[0], STATE, Some("Done"));
    annotate(&mut healthy.nodes[0], DESIRED_IMAGE, Some(&img(RAN)));
    let merged = most_cautious(vec![healthy.plan(None), plain]);
    assert_eq!(summary(&merged.nodes[1].diagnosis), ["copiesDisagree"]);
    assert_eq!(merged.nodes[1].node, NODE);
}
