//! `mosc-guard remove-finalizers` (and its old name, `release-finalizers`): nothing left holding
//! the finalizer, and `--force` on record.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_finalizers_leaves_no_mosc_with_the_finalizer() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    // A second, idle pool and MachineOSConfig (no nodes): protected, never deleted.
    create_infra_mosc(&cluster).await;
    wait_finalizer(&cluster, "infra").await;
    delete_deferred(&cluster, &rollout, &[]).await;

    // With the mutating webhook still registered, the finalizer comes straight back.
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.run_cli(&BIN, &["remove-finalizers"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("machineosconfig/infra: the finalizer came back"),
        "{stdout}"
    );

    // Uninstall order: webhook configurations first, then the guard, then remove-finalizers.
    let out = kubectl(
        &cluster,
        ["delete", "mutatingwebhookconfiguration", "mosc-guard"],
    )
    .await;
    assert!(out.success(), "{out:?}");
    testkit::webhooks::unregister_validating_webhook(&cluster.cp)
        .await
        .expect("unregister");
    guard.stop();
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.run_cli(&BIN, &["remove-finalizers"]);
    assert_eq!(
        code,
        Some(1),
        "a deletion still deferred is kept: {stdout}{stderr}"
    );
    assert!(
        stdout.contains("removed the finalizer from machineosconfig/infra"),
        "{stdout}"
    );
    assert!(
        stdout.contains("kept machineosconfig/worker: deletion of machineosconfig \"worker\" deferred: 1 node still needs"),
        "{stdout}"
    );
    assert!(stdout.contains("--force"), "{stdout}");

    // Once the rollout settles, the same command removes the rest and exits 0 (run under its
    // old name, as installed runbooks call it).
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.run_cli(&BIN, &["release-finalizers"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("removed the finalizer from machineosconfig/worker"),
        "{stdout}"
    );
    wait_mosc_gone(&cluster.client, "worker").await;
    let left = mco::list_all(&mco::moscs(&cluster.client))
        .await
        .expect("list");
    assert!(
        left.iter()
            .all(|m| !finalizers(m).iter().any(|f| f == FINALIZER)),
        "no MachineOSConfig keeps the finalizer: {left:?}"
    );
    let CliRun { code, stdout, .. } = cluster.run_cli(&BIN, &["remove-finalizers"]);
    assert_eq!(
        (code, stdout.trim()),
        (Some(0), "no MachineOSConfig carries the finalizer")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_finalizers_force_lets_a_held_deletion_go_on_record() {
    let (cluster, guard, rollout) = deferring(SimConfig::real_timing()).await;
    delete_deferred(&cluster, &rollout, &[]).await;

    // With the webhooks still registered, the forced removal passes the validating webhook only
    // because it records the override annotation in the same patch.
    let CliRun {
        code,
        stdout,
        stderr,
    } = cluster.run_cli(&BIN, &["remove-finalizers", "--force"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("removed the finalizer from machineosconfig/worker"),
        "{stdout}"
    );
    wait_mosc_gone(&cluster.client, "worker").await;
    let log = guard.log_tail(300);
    assert!(
        log.lines().any(|l| l.contains("admission decision")
            && l.contains("name=worker")
            && l.contains("override_reason=\"mosc-guard remove-finalizers --force\"")
            && l.contains("result=overridden")),
        "{log}"
    );
}
