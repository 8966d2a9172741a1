//! Without the guard: the report's deletion degrades the pool.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unguarded_deletion_degrades_pool() {
    let started = std::time::Instant::now();
    let cluster = seed(SimConfig::real_timing()).await;

    // Steps 1-3: MOSC created, build succeeded, first node mid-update to the new image (held).
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    let image = rollout.build.image_ref().expect("digested image reference");
    let digest = image.digest.clone().expect("image has a digest");

    // Step 4: delete the MOSC at once. Nothing stops it.
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(
        out.success(),
        "kubectl delete machineosconfig failed: {}",
        out.stderr
    );

    // MCO 4.20 deletes every image of the MOSC's builds, in use or not, and the builds.
    wait_image_and_builds_gone(&cluster, &image).await;

    // The node mid-update keeps desiredImage = the deleted image; its daemon now fails to pull it.
    assert_keeps_desired_image(
        &cluster,
        &rollout,
        "a node mid-update keeps its desiredImage in 4.20",
    )
    .await;
    cluster.sim.release(&rollout.node);

    // It degrades, the pool too; the other workers were never told to use the image and stay
    // on the base OS.
    let reason = wait_node_fails_pull(&cluster, &rollout).await;
    assert!(
        reason.contains(&format!(
            "reading manifest {digest} in {}",
            image.repository()
        )),
        "reason: {reason}"
    );
    // As an admin sees it.
    let out = cluster
        .cp
        .kubectl([
            "get",
            "mcp",
            "worker",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="NodeDegraded")].status} {.status.degradedMachineCount}"#,
        ])
        .await
        .expect("run kubectl get mcp");
    assert_eq!(
        out.stdout.trim(),
        "True 1",
        "kubectl get mcp: {}",
        out.stderr
    );
    kubectl(&cluster, ["get", "mcp,machineosconfigs,machineosbuilds"]).await;
    eprintln!(
        "unguarded_deletion_degrades_pool took {:.2?}",
        started.elapsed()
    );
}
