//! The commands docs/runbooks.md gives for recognising a degraded pool.

use super::*;

/// The jsonpath expressions of docs/runbooks.md, "A pool already degraded by this bug",
/// "Recognising it".
const DEGRADED_NODES: &str = r#"{range .items[?(@.metadata.annotations.machineconfiguration\.openshift\.io/state=="Degraded")]}{.metadata.name}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/reason}{"\n"}{end}"#;

const NODE_IMAGES: &str = r#"{range .items[*]}{.metadata.name}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/state}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/desiredImage}{"\t"}{.metadata.annotations.machineconfiguration\.openshift\.io/currentImage}{"\n"}{end}"#;

const POOL_NODE_DEGRADED: &str = r#"{range .status.conditions[?(@.type=="NodeDegraded")]}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}"#;

/// The commands docs/runbooks.md gives for recognising a degraded pool print what it says,
/// on objects shaped as MCO 4.20 leaves them (node annotations, pool condition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runbooks_md_commands_find_a_degraded_node() {
    use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, REASON, STATE, STATE_DEGRADED};
    use testkit::scenario::{WORKER_ROLE_LABEL, create_pool};

    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/runbooks.md"))
        .expect("read docs/runbooks.md");
    for expr in [DEGRADED_NODES, NODE_IMAGES, POOL_NODE_DEGRADED] {
        assert!(
            docs.contains(&format!("-o jsonpath='{expr}'")),
            "docs/runbooks.md no longer shows {expr}"
        );
    }

    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client();
    create_pool(&client, "worker", WORKER_ROLE_LABEL, 1)
        .await
        .expect("pool");
    let nodes = create_worker_nodes(&client, 2).await;
    let (deleted, running) = (image("3d"), image("4c"));
    let reason = format!(
        "error running rpm-ostree rebase --experimental ostree-unverified-registry:{deleted}: \
         error: reading manifest sha256:{} in {}: manifest unknown",
        "3d".repeat(32),
        deleted.split_once('@').expect("digest").0
    );
    mco::nodes(&client)
        .patch(
            &nodes[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                STATE: STATE_DEGRADED, REASON: reason,
                DESIRED_IMAGE: deleted, CURRENT_IMAGE: running,
            }}})),
        )
        .await
        .expect("degrade node");
    let message =
        "Node ip-10-0-11-240.us-east-2.compute.internal is reporting: \"manifest unknown\"";
    mco::mcps(&client)
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"degradedMachineCount": 1, "conditions": [{
                    "type": "NodeDegraded", "status": "True",
                    "reason": "1 nodes are reporting degraded status on sync",
                    "message": message, "lastTransitionTime": "2026-11-30T00:00:00Z",
                }]}}),
            ),
        )
        .await
        .expect("pool status");

    let jsonpath = |expr: &str| format!("jsonpath={expr}");
    let out = kubectl_ok(
        &cp,
        &["get", "nodes", "-o", &jsonpath(DEGRADED_NODES)],
        None,
    )
    .await;
    assert_eq!(out.stdout, format!("{}\t{reason}\n", nodes[0]));
    let out = kubectl_ok(&cp, &["get", "nodes", "-o", &jsonpath(NODE_IMAGES)], None).await;
    assert_eq!(
        out.stdout,
        format!(
            "{}\tDegraded\t{deleted}\t{running}\n{}\tDone\t\t\n",
            nodes[0], nodes[1]
        )
    );
    let out = kubectl_ok(
        &cp,
        &["get", "mcp", "worker", "-o", &jsonpath(POOL_NODE_DEGRADED)],
        None,
    )
    .await;
    assert_eq!(
        out.stdout,
        format!("True\t1 nodes are reporting degraded status on sync\t{message}\n")
    );
    kubectl_ok(&cp, &["get", "mcp"], None).await;
}
