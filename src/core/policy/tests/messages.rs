//! The words of denials and overrides, from verdicts of the policy.

use serde_json::json;

use super::*;

#[test]
fn override_allows_and_keeps_the_reasons() {
    let mut c = Cluster::report();
    c.moscs[0]["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: "node is being replaced"});
    let v = decide(&c, "worker", PolicyMode::InFlight);
    assert!(v.allowed && v.overridden());
    assert_eq!(blocking_names(&v), vec![NODE]);
    let warnings = message::override_warnings(&v);
    assert!(
        warnings[0].contains("node is being replaced"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains(NODE), "{warnings:?}");
    assert!(
        warnings.last().is_some_and(|w| w.contains("oc annotate machineosbuild -l machineconfiguration.openshift.io/machine-os-config=worker")),
        "{warnings:?}"
    );
    assert!(warnings.iter().all(|w| w.len() <= 256));

    // An override on a deletion that is safe anyway produces no warnings.
    let mut settled = Cluster::report();
    settled.nodes.truncate(0);
    settled.moscs[0]["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: "x"});
    let v = decide(&settled, "worker", PolicyMode::InFlight);
    assert!(v.allowed && !v.overridden());
    assert!(message::override_warnings(&v).is_empty());
}

#[test]
fn denial_message_is_actionable() {
    let v = decide(&Cluster::report(), "worker", PolicyMode::InFlight);
    let msg = message::denial(&v);
    let want = format!(
        "machineosconfig \"worker\" cannot be deleted yet: 1 node still needs an image built from it.\n  \
         {NODE} (pool worker, state Working): desired .../ocb-image@sha256:01971adebd63..., current <none>\n  \
         pool worker is rolling out .../ocb-image@sha256:01971adebd63...: 2 nodes do not run it yet: {NODE}, worker-b; MCO updates them one after another\n\
         Deleting it now removes that image from the registry and the node fails \"manifest unknown\" (the pool goes Degraded).\n\
         Wait until `oc get mcp worker` shows UPDATED=True with every machine updated, then delete again; \
         or stop the rollout first (`oc patch mcp worker --type merge -p '{{\"spec\":{{\"paused\":true}}}}'`) \
         and delete once the nodes already updating are done; or override with:\n  \
         oc annotate machineosconfig worker mosc-guard.dev/allow-deletion=\"<reason>\"\n\
         Decided with the rules of OpenShift 4.20 (the cluster runs 4.20.8)."
    );
    assert_eq!(msg, want);
}

#[test]
fn on_4_23_the_denial_leaves_the_image_to_mcos_in_use_check() {
    let mut snap = Cluster::report().snapshot();
    snap.release = ClusterRelease::given("4.23.0");
    let mosc = snap.machine_os_config("worker").expect("worker");
    let msg = message::denial(&evaluate(
        &snap,
        Deletion::MachineOSConfig(mosc),
        PolicyMode::InFlight,
    ));
    assert!(
        msg.contains(
            "Deleting it now leaves that image to MCO 4.23's in-use check, which keeps (and leaks) an image \
             only while its cache shows a node of the build's own pool using it, spelled exactly so; \
             a node it misses fails \"manifest unknown\" (the pool goes Degraded).\n"
        ),
        "{msg}"
    );
    assert!(!msg.contains("removes that image"), "{msg}");
}

#[test]
fn denial_lists_five_nodes_then_counts_the_rest() {
    let mut c = Cluster::report();
    c.nodes = (0..8)
        .map(|i| {
            node(
                &format!("n{i}"),
                &["worker"],
                Some(&img(NEW)),
                None,
                "Working",
            )
        })
        .collect();
    let msg = message::denial(&decide(&c, "worker", PolicyMode::InFlight));
    assert!(
        msg.contains("8 nodes still need an image built from it"),
        "{msg}"
    );
    assert!(
        msg.contains("  n4 (pool worker") && !msg.contains("  n5 (pool"),
        "{msg}"
    );
    assert!(msg.contains("  and 3 more\n"), "{msg}");
    assert!(
        msg.contains("removes those images from the registry and the nodes fail"),
        "{msg}"
    );
}

#[test]
fn in_use_denial_explains_the_strict_mode() {
    let mut c = Cluster::report();
    c.nodes = vec![node(
        NODE,
        &["worker"],
        Some(&img(NEW)),
        Some(&img(NEW)),
        "Done",
    )];
    let v = decide(&c, "worker-8f2a1c", PolicyMode::InUse);
    let msg = message::denial(&v);
    assert!(msg.starts_with("machineosbuild \"worker-8f2a1c\" cannot be deleted yet: 1 node still needs or runs its image (policy in-use)."), "{msg}");
    assert!(
        msg.contains("runs .../ocb-image@sha256:01971adebd63..."),
        "{msg}"
    );
    assert!(
        msg.contains("Policy in-use blocks while any node runs"),
        "{msg}"
    );
    assert!(
        msg.contains(
            "oc annotate machineosbuild worker-8f2a1c mosc-guard.dev/allow-deletion=\"<reason>\"\nDecided with"
        ),
        "{msg}"
    );
}

#[test]
fn build_without_an_image_yet_guards_nothing() {
    let mut c = Cluster::report();
    c.mosbs = vec![
        json!({"metadata": {"name": "worker-new"}, "spec": {"machineOSConfig": {"name": "worker"}}}),
    ];
    let v = decide(&c, "worker-new", PolicyMode::InUse);
    assert!(v.allowed && v.images.is_empty());
}

#[test]
fn denial_without_a_known_pool_says_what_to_wait_for() {
    let mut c = Cluster::report();
    c.nodes = vec![node("loose", &["edge"], Some(&img(NEW)), None, "Working")];
    let msg = message::denial(&decide(&c, "worker", PolicyMode::InFlight));
    assert!(msg.contains("loose (pool <none>, state Working)"), "{msg}");
    assert!(
        msg.contains("Wait until those nodes report state Done on that image"),
        "{msg}"
    );
    assert!(!msg.contains("oc get mcp"), "{msg}");
}
