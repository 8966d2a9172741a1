//! A pool through several rendered configs (4.20): what prune deletes, what MCO then deletes
//! from the registry, and that every node still updates and rolls back afterwards.

use std::time::Duration;

use super::*;
use testkit::mco;
use testkit::simulator::SimConfig;

/// The guard's count of build deletions it allowed.
const REVIEWED: &str =
    "mosc_guard_admission_decisions_total{resource=\"machineosbuilds\",result=\"allowed\"}";

/// Builds A to D (configs R0 to R3), settled on D. `prune --keep 2 --apply` deletes A and B and
/// MCO deletes their images; rolling back to R2 reuses C (kept, the same object), a change to
/// R4 builds E, rolling back to R0 builds A's name again (its image is gone, nothing degrades).
/// A last `prune --keep 1 --apply` leaves exactly the image the nodes run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_prune_every_node_still_updates_and_rolls_back_and_the_registry_holds_only_what_is_kept()
 {
    let cluster = seed(SimConfig::fast()).await;
    let guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let builds = settle_through(&cluster, &[R1, R2, R3]).await;
    let [a, b, c, d] = [&builds[0], &builds[1], &builds[2], &builds[3]];

    let run = prune(&cluster, &["--keep", "2", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let plan = run.json();
    assert_eq!(builds_in(&plan, "deletable"), mosbs(&[a, b]), "{plan:#}");
    assert_eq!(reasons(&plan, &c.mosb), ["newest"]);
    assert!(
        in_registry(&cluster, &a.image).await,
        "the plan deleted nothing"
    );

    let run = prune(&cluster, &["--keep", "2", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(deleted(&run.json()), mosbs(&[a, b]), "{run:?}");
    // The guard reviewed each delete (MCO's own requests do not reach it).
    assert_eq!(guard.counter(REVIEWED).await.expect("metrics"), 2.0);
    wait_gone(&cluster, a).await;
    wait_gone(&cluster, b).await;
    for kept in [c, d] {
        assert!(
            in_registry(&cluster, &kept.image).await,
            "{} kept",
            kept.mosb
        );
    }

    // Roll back to R2: MCO reuses C, the very object prune kept.
    let c_uid = mco::mosbs(&cluster.client)
        .get(&c.mosb)
        .await
        .expect("C")
        .metadata
        .uid;
    render(&cluster, R2).await;
    wait_rolled_out(&cluster, &c.image).await;
    assert_eq!(
        mco::mosbs(&cluster.client)
            .get(&c.mosb)
            .await
            .expect("C")
            .metadata
            .uid,
        c_uid,
        "the rollback reused C"
    );
    // A new change builds and rolls out.
    render(&cluster, R4).await;
    let e = wait_new_build(&cluster, &c.image).await;
    wait_rolled_out(&cluster, &e.image).await;
    // Back to R0, whose build prune deleted: MCO builds it again under A's name.
    render(&cluster, &rendered_config("worker")).await;
    let a2 = wait_new_build(&cluster, &e.image).await;
    assert_eq!(a2.mosb, a.mosb, "the same inputs, the same name");
    assert_ne!(a2.image, a.image, "a new image");
    wait_rolled_out(&cluster, &a2.image).await;

    // Keep one: every image but the one the nodes run goes.
    let run = prune(&cluster, &["--keep", "1", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(deleted(&run.json()), mosbs(&[c, d, &e]), "{run:?}");
    assert_eq!(guard.counter(REVIEWED).await.expect("metrics"), 5.0);
    for gone in [c, d, &e] {
        wait_gone(&cluster, gone).await;
    }
    for build in [a, b, c, d, &e, &a2] {
        assert_eq!(
            in_registry(&cluster, &build.image).await,
            build.image == a2.image,
            "{}: {}",
            build.mosb,
            build.image
        );
    }
    assert_mco_never_refused(&cluster);
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// Builds A (R0) and B (R1), settled on B; C starts for R2 and runs. Prune keeps B (its nodes,
/// the pool's `status.configuration`) and C (building, `spec.configuration`) and deletes A.
/// The change rolled back to R1 reuses B, the same object, and MCO deletes the running C itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_rolled_back_mid_build_reuses_the_build_prune_kept() {
    let cluster = seed(SimConfig::fast()).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let builds = settle_through(&cluster, &[R1]).await;
    let [a, b] = [&builds[0], &builds[1]];

    cluster.sim.set_build_delay(Duration::from_secs(600));
    render(&cluster, R2).await;
    let c = build_name_for(&cluster, "worker").await.expect("C's name");
    wait_build_job(&cluster, &c).await.expect("C started");
    // MCO names the running build on its MachineOSConfig just after it starts the Job.
    let current = wait_current_build_other_than(&cluster, "worker", &b.mosb)
        .await
        .expect("C named current");
    assert_eq!(current, c);
    let run = prune(&cluster, &["--keep", "0", "--apply", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(deleted(&report), mosbs(&[a]), "{report:#}");
    let kept_b = reasons(&report, &b.mosb);
    assert!(
        kept_b.contains(&"nodeNeedsImage".to_string())
            && kept_b.contains(&"poolConfiguration".to_string()),
        "{kept_b:?}"
    );
    let why_b = report["kept"]
        .as_array()
        .expect("kept")
        .iter()
        .find(|k| k["build"] == b.mosb.as_str())
        .expect("B")["why"]
        .to_string();
    assert!(
        why_b.contains("status.configuration") && why_b.contains("a rollback reuses"),
        "{why_b}"
    );
    assert_eq!(
        reasons(&report, &c),
        ["currentBuild", "poolConfiguration", "building"],
        "{report:#}"
    );
    wait_gone(&cluster, a).await;

    let b_uid = mco::mosbs(&cluster.client)
        .get(&b.mosb)
        .await
        .expect("B")
        .metadata
        .uid;
    render(&cluster, R1).await;
    wait_build_gone(&cluster, &c).await;
    wait_rolled_out(&cluster, &b.image).await;
    assert_eq!(
        mco::mosbs(&cluster.client)
            .get(&b.mosb)
            .await
            .expect("B")
            .metadata
            .uid,
        b_uid,
        "B reused, not built again"
    );
    assert!(in_registry(&cluster, &b.image).await);
    assert_mco_never_refused(&cluster);
    assert_faithful_and_never_degraded(&cluster, &watch);
}

async fn wait_build_gone(cluster: &Cluster, name: &str) {
    testkit::poll::wait_gone(&mco::mosbs(&cluster.client), name, STEP_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("MachineOSBuild {name} deleted: {e}"));
}
