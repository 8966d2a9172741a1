//! Cluster topologies beyond the report's worker pool, on a real control plane, registry and the
//! MCO simulator (on 4.20) at the real machine-os-builder's timing (`SimConfig::real_timing`), with
//! mosc-guard registered in deny mode. Pool membership is MCO's (`pkg/helpers`, release-4.20),
//! in the simulator as in the guard:
//!
//! - a worker pool with a Windows node (WMCO's: worker role, `kubernetes.io/os=windows`, no MCO
//!   annotations), which MCO never manages;
//! - a compact cluster, every node labelled master, worker and a custom role: the nodes are in
//!   pool `master` ("defaulting to master");
//! - a stray pool with `nodeSelector: {}`, which selects no node.
//!
//! Each deletion is a real `kubectl delete` as the admin: refused while a node is mid-update
//! and in the gap before the next node is targeted, allowed once every node of the pool runs
//! the image, and the pool then leaves image mode without degrading.
//!
//! Each test starts its own control plane, registry and guard, and stops them when it ends.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::json;

use testkit::guard::GuardBin;
use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DEGRADED, STATE_DONE};
use testkit::scenario::objects::create_windows_node;
use testkit::scenario::{
    Build, Cluster, Rollout, create_labelled_nodes, create_pool, create_pool_selecting,
    node_annotations, registered_guard, rendered_config, wait_for,
};
use testkit::scenario::{
    DegradedWatch, STEP_TIMEOUT, kubectl, wait_image_and_builds_gone, wait_pool_settled_in,
    wait_rolled_out_in,
};
use testkit::simulator::{
    JOB_UID_ANNOTATION, MCO_NAMESPACE, SimConfig, digest_configmap_name, job_name,
};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

const MASTER_ROLE: &str = "node-role.kubernetes.io/master";
const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";
const INFRA_ROLE: &str = "node-role.kubernetes.io/infra";

/// Waits until the simulator's pool status counts `machines` nodes in `pool`: the topology
/// is as MCO places it before anything is decided on it.
async fn wait_machine_count(cluster: &Cluster, pool: &str, machines: i64) {
    wait_for(
        || async {
            let p = mco::mcps(&cluster.client).get(pool).await?;
            let count = p
                .data
                .get("status")
                .and_then(|s| s.get("machineCount"))
                .and_then(serde_json::Value::as_i64);
            Ok((count == Some(machines)).then_some(()))
        },
        STEP_TIMEOUT,
        &format!("pool {pool} to count {machines} machines"),
    )
    .await
    .unwrap_or_else(|e| panic!("pool {pool} membership: {e}"));
}

/// `kubectl delete machineosconfig <pool>` must be refused, the refusal naming each of `names`.
async fn assert_delete_refused(cluster: &Cluster, pool: &str, names: &[&str], when: &str) {
    let out = kubectl(cluster, ["delete", "machineosconfig", pool]).await;
    assert!(
        !out.success(),
        "{when}: the delete must be refused: {out:?}"
    );
    let head = format!("machineosconfig \"{pool}\" cannot be deleted yet");
    assert!(
        out.stderr.contains(&head),
        "{when}: missing {head:?} in {}",
        out.stderr
    );
    for name in names {
        assert!(
            out.stderr.contains(name),
            "{when}: missing {name:?} in {}",
            out.stderr
        );
    }
    assert!(
        mco::moscs(&cluster.client)
            .get_opt(pool)
            .await
            .expect("read MachineOSConfig")
            .is_some(),
        "{when}: the MachineOSConfig is still there"
    );
}

/// `kubectl delete machineosconfig <pool>` must go through.
async fn assert_delete_allowed(cluster: &Cluster, pool: &str) {
    let out = kubectl(cluster, ["delete", "machineosconfig", pool]).await;
    assert!(
        out.success(),
        "every node of pool {pool} runs the image: the delete goes through: {out:?}"
    );
}

/// The rollout's build finished as MCO leaves it, and the delete of MOSC `pool` is refused
/// naming the node mid-update and the pool (`when` says when, for the message).
async fn assert_refused_mid_update(cluster: &Cluster, pool: &str, rollout: &Rollout, when: &str) {
    assert_build_objects_after_success(cluster, &rollout.build).await;
    let pool_name = format!("pool {pool}");
    assert_delete_refused(cluster, pool, &[rollout.node.as_str(), &pool_name], when).await;
}

/// [`open_the_gap`], then the delete is still refused naming the pool and its nodes not yet
/// targeted.
async fn assert_refused_in_the_gap(
    cluster: &Cluster,
    pool: &str,
    rollout: &Rollout,
    nodes: &[String],
    when: &str,
) {
    let rest = open_the_gap(cluster, pool, rollout, nodes).await;
    let pool_name = format!("pool {pool}");
    assert_delete_refused(
        cluster,
        pool,
        &[&[pool_name.as_str()], rest.as_slice()].concat(),
        when,
    )
    .await;
}

/// The rollout of `pool` (`nodes`) finishes, the delete is allowed, and the pool leaves image
/// mode cleanly.
async fn finish_and_leave_image_mode(
    cluster: &Cluster,
    pool: &str,
    rollout: &Rollout,
    nodes: &[String],
    watches: &[DegradedWatch],
) {
    cluster.sim.release_pool(pool);
    wait_rolled_out_in(cluster, pool, nodes, &rollout.build.image).await;
    assert_delete_allowed(cluster, pool).await;
    assert_left_image_mode_cleanly(cluster, pool, &rollout.build, nodes, nodes, watches).await;
}

/// The gap between two batches: the node controller holds `pool`, the held node finishes its
/// update, and the pool's other nodes are not targeted yet. Returns those other nodes.
async fn open_the_gap<'a>(
    cluster: &Cluster,
    pool: &str,
    rollout: &Rollout,
    nodes: &'a [String],
) -> Vec<&'a str> {
    cluster.sim.hold_pool(pool);
    cluster.sim.release(&rollout.node);
    let (client, node, image) = (&cluster.client, &rollout.node, &rollout.build.image);
    wait_for(
        || async move {
            let a = node_annotations(client, node).await?;
            let done = a.get(STATE).map(String::as_str) == Some(STATE_DONE)
                && a.get(CURRENT_IMAGE) == Some(image)
                && a.get(DESIRED_IMAGE) == Some(image);
            Ok(done.then_some(()))
        },
        STEP_TIMEOUT,
        &format!("{node} to be Done on {image}"),
    )
    .await
    .expect("the first node finishes its update");
    let rest: Vec<&str> = nodes
        .iter()
        .map(String::as_str)
        .filter(|n| *n != rollout.node)
        .collect();
    for n in &rest {
        let a = node_annotations(client, n).await.expect("read node");
        assert_eq!(
            a.get(DESIRED_IMAGE),
            None,
            "{n} is not targeted yet (the gap)"
        );
    }
    rest
}

/// A succeeded build's objects as 4.20 leaves them: the MOSB names its Job by uid, the Job and
/// its ConfigMaps and Secrets are gone, the digest ConfigMap holds the image's digest.
async fn assert_build_objects_after_success(cluster: &Cluster, build: &Build) {
    let mosb = mco::mosbs(&cluster.client)
        .get(&build.mosb)
        .await
        .expect("read the MachineOSBuild");
    let job_uid = mosb
        .metadata
        .annotations
        .unwrap_or_default()
        .remove(JOB_UID_ANNOTATION)
        .unwrap_or_default();
    assert!(!job_uid.is_empty(), "{} names its Job", build.mosb);
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let job = job_name(&build.mosb);
    let ephemeral_configmaps = ["containerfile", "mc", "additionaltrustbundle"]
        .map(|prefix| format!("{prefix}-{}", build.mosb));
    let ephemeral_secrets = ["base", "final"].map(|prefix| format!("{prefix}-{}", build.mosb));
    wait_for(
        || async {
            let mut left = Vec::new();
            if jobs.get_opt(&job).await?.is_some() {
                left.push(job.clone());
            }
            for name in &ephemeral_configmaps {
                if configmaps.get_opt(name).await?.is_some() {
                    left.push(name.clone());
                }
            }
            for name in &ephemeral_secrets {
                if secrets.get_opt(name).await?.is_some() {
                    left.push(name.clone());
                }
            }
            Ok(left.is_empty().then_some(()))
        },
        STEP_TIMEOUT,
        &format!(
            "the Job, ConfigMaps and Secrets of {} to be cleaned up",
            build.mosb
        ),
    )
    .await
    .expect("a succeeded build's ephemeral objects go");
    let digest = configmaps
        .get(&digest_configmap_name(&build.mosb))
        .await
        .expect("the digest ConfigMap stays")
        .data
        .unwrap_or_default()
        .remove("digest");
    let want = build.image_ref().expect("image").digest;
    assert_eq!(
        digest, want,
        "the digest ConfigMap carries the build's digest"
    );
}

/// Every node of `pool` (`nodes`) left image mode and the pool is Updated; the MOSB-delete
/// handler removed the build's digest ConfigMap; no node of `all_nodes` ever degraded; the
/// simulator wrote nothing a real API server rejects.
async fn assert_left_image_mode_cleanly(
    cluster: &Cluster,
    pool: &str,
    build: &Build,
    nodes: &[String],
    all_nodes: &[String],
    watches: &[DegradedWatch],
) {
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let digest_cm = digest_configmap_name(&build.mosb);
    wait_for(
        || async {
            Ok(configmaps
                .get_opt(&digest_cm)
                .await?
                .is_none()
                .then_some(()))
        },
        STEP_TIMEOUT,
        &format!("ConfigMap {digest_cm} to be deleted with its build"),
    )
    .await
    .expect("digest ConfigMap deleted");
    wait_pool_settled_in(
        cluster,
        pool,
        nodes,
        |a| !a.contains_key(DESIRED_IMAGE) && !a.contains_key(CURRENT_IMAGE),
        &format!("pool {pool} to revert to the base OS image"),
    )
    .await;
    for node in all_nodes {
        let a = node_annotations(&cluster.client, node)
            .await
            .expect("read node");
        assert_ne!(
            a.get(STATE).map(String::as_str),
            Some(STATE_DEGRADED),
            "{node}: {a:?}"
        );
    }
    assert!(
        watches.iter().all(|w| !w.ever_degraded()),
        "no pool ever reported Degraded or NodeDegraded"
    );
    assert_eq!(
        cluster.sim.rejected_writes(),
        Vec::<String>::new(),
        "the simulator wrote objects the API server rejected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pool_with_a_windows_node_leaves_image_mode_once_its_linux_nodes_settled() {
    let started = std::time::Instant::now();
    let cluster = Cluster::seed(3, SimConfig::real_timing())
        .await
        .expect("seed cluster");
    let windows = "winworker-8k2lq";
    create_windows_node(&cluster.client, windows)
        .await
        .expect("create the Windows node");
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    // MCO never manages the Windows node: the pool counts the three Linux workers.
    wait_machine_count(&cluster, "worker", 3).await;

    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    assert_refused_mid_update(&cluster, "worker", &rollout, "a Linux worker mid-update").await;

    cluster.sim.release(&rollout.node);
    wait_rolled_out_in(&cluster, "worker", &cluster.nodes, &rollout.build.image).await;
    let a = node_annotations(&cluster.client, windows)
        .await
        .expect("read the Windows node");
    assert!(
        a.keys().all(|k| !k.starts_with(mco::PREFIX)),
        "MCO never touched the Windows node: {a:?}"
    );
    // Every Linux node runs the image; the Windows node never will, and never needs it.
    assert_delete_allowed(&cluster, "worker").await;
    let image = rollout.build.image_ref().expect("image reference");
    wait_image_and_builds_gone(&cluster, &image).await;
    let mut all = cluster.nodes.clone();
    all.push(windows.to_owned());
    assert_left_image_mode_cleanly(
        &cluster,
        "worker",
        &rollout.build,
        &cluster.nodes,
        &all,
        &[watch],
    )
    .await;
    eprintln!("windows-node topology took {:.2?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_clusters_master_pool_rollout_is_guarded() {
    let started = std::time::Instant::now();
    let mut cluster = Cluster::bare(SimConfig::real_timing())
        .await
        .expect("start the cluster");
    let client = cluster.client.clone();
    for (pool, role) in [
        ("master", MASTER_ROLE),
        ("worker", WORKER_ROLE),
        ("infra", INFRA_ROLE),
    ] {
        create_pool(&client, pool, role, 1)
            .await
            .unwrap_or_else(|e| panic!("create pool {pool}: {e}"));
    }
    let masters: Vec<String> = (0..3)
        .map(|i| format!("master-{i}.compact.example.com"))
        .collect();
    create_labelled_nodes(
        &client,
        &masters,
        &[(MASTER_ROLE, ""), (WORKER_ROLE, ""), (INFRA_ROLE, "")],
        &rendered_config("master"),
    )
    .await
    .expect("create the compact cluster's nodes");
    cluster.nodes = masters.clone();
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watches = [
        DegradedWatch::start(&client, "master"),
        DegradedWatch::start(&client, "worker"),
        DegradedWatch::start(&client, "infra"),
    ];
    // Master beats the custom pool infra (and worker): every node is in pool master.
    wait_machine_count(&cluster, "master", 3).await;
    wait_machine_count(&cluster, "infra", 0).await;
    wait_machine_count(&cluster, "worker", 0).await;

    let rollout = cluster
        .start_rollout("master", &masters[0], STEP_TIMEOUT)
        .await
        .expect("master rollout starts");
    assert_refused_mid_update(&cluster, "master", &rollout, "a master mid-update").await;

    // The first master is done; the next is not targeted yet.
    assert_refused_in_the_gap(
        &cluster,
        "master",
        &rollout,
        &masters,
        "the gap before the next master is targeted",
    )
    .await;

    finish_and_leave_image_mode(&cluster, "master", &rollout, &masters, &watches).await;
    eprintln!("compact topology took {:.2?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_empty_selector_pool_changes_no_verdict() {
    let started = std::time::Instant::now();
    let cluster = Cluster::seed(3, SimConfig::real_timing())
        .await
        .expect("seed cluster");
    create_pool_selecting(&cluster.client, "stray", json!({}), 1)
        .await
        .expect("create pool stray");
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watches = [
        DegradedWatch::start(&cluster.client, "worker"),
        DegradedWatch::start(&cluster.client, "stray"),
    ];
    // An empty selector selects no node (it would be a custom pool claiming every worker).
    wait_machine_count(&cluster, "stray", 0).await;
    wait_machine_count(&cluster, "worker", 3).await;

    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    assert_refused_mid_update(&cluster, "worker", &rollout, "a worker mid-update").await;
    assert_refused_in_the_gap(
        &cluster,
        "worker",
        &rollout,
        &cluster.nodes,
        "the gap before the next worker is targeted",
    )
    .await;

    finish_and_leave_image_mode(&cluster, "worker", &rollout, &cluster.nodes, &watches).await;
    eprintln!("stray-pool topology took {:.2?}", started.elapsed());
}
