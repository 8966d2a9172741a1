//! A MachineSet scaling up pool `worker` while its MachineOSConfig is deleted. From 4.21 the
//! Machine Config Server puts the pool's layered image into the joining machine's Ignition and
//! its first boot pulls it before the Node exists: the guard refuses the deletion until the
//! machine has joined, and without the guard the first boot fails. On 4.20 (the control) the
//! machine joins with the rendered config only and the guard lets the deletion through.

use testkit::machine_api::{self, NAMESPACE};
use testkit::mco::{CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DONE};
use testkit::scenario::*;
use testkit::simulator::{BootOutcome, FirstBoot, SimConfig};

use super::*;

/// The installer's names: MachineSet `<infra>-worker-<zone>`, its Machines with 5 more
/// characters.
const MACHINE_SET: &str = "ci-ln-x7q2m-worker-us-east-2a";
const MACHINE: &str = "ci-ln-x7q2m-worker-us-east-2a-7xk4p";

/// A `release` cluster with the guard registered (when `guard`), pool `worker` settled on its
/// first image, and [`MACHINE`] scaled up, its first boot held after the Machine Config Server
/// served its Ignition: provably joining (Provisioned, no nodeRef). Returns what was served.
async fn scaled_up_while_layered(
    release: Release,
    guard: bool,
) -> (Cluster, Option<testkit::guard::Guard>, Build, FirstBoot) {
    let cluster = Cluster::seed_on(release, 3, SimConfig::real_timing())
        .await
        .unwrap_or_else(|e| panic!("seed a {release} cluster: {e}"));
    let guard = if guard {
        Some(registered_guard(&BIN, &cluster, &[]).await)
    } else {
        None
    };
    let build = layered_and_settled(&cluster).await;
    scale_up(&cluster, MACHINE, MACHINE_SET, "worker", true)
        .await
        .expect("MachineSet scales up");
    let boot = wait_ignition_served(&cluster, MACHINE).await;
    assert_eq!(boot.pool, "worker");
    assert_eq!(boot.config, rendered_config("worker"));
    assert_eq!(boot.outcome, BootOutcome::Booting, "the first boot is held");
    let m = machine(&cluster.client, MACHINE).await.expect("machine");
    assert_eq!(machine_api::phase(&m), Some("Provisioned"), "{m:?}");
    assert_eq!(machine_api::node_ref(&m), None, "not joined yet");
    (cluster, guard, build, boot)
}

/// `.../ocb-image@sha256:<12 hex>...`, as the denial abbreviates an image.
fn short(image: &str) -> String {
    let digest = ImageRef::parse(image)
        .expect("image")
        .digest
        .expect("digest");
    format!(".../ocb-image@{}...", &digest[..7 + 12])
}

/// 4.21, guarded, [`SimConfig::real_timing`]: the deletion is refused while the machine joins,
/// naming it and its MachineSet; once it joined with the image (and the pool settled on it) the
/// deletion goes through and nothing degrades.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_deletion_is_denied_while_a_machine_joins() {
    let (mut cluster, guard, build, boot) = scaled_up_while_layered(Release::V4_21, true).await;
    let _guard = guard.expect("guard");
    let watch = DegradedWatch::start(&cluster.client, "worker");
    assert_eq!(
        boot.image.as_deref(),
        Some(build.image.as_str()),
        "4.21's Machine Config Server serves the layered image"
    );

    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(!out.success(), "delete while the machine joins: {out:?}");
    for want in [
        "admission webhook \"deletions.mosc-guard.dev\" denied the request",
        "machineosconfig \"worker\" cannot be deleted yet: 1 joining machine pulls an image built from it at first boot.",
        &format!(
            "machine {NAMESPACE}/{MACHINE} (Provisioned, MachineSet {MACHINE_SET}, pool worker) is joining and pulls {} at first boot",
            short(&build.image)
        ),
        "Wait until it has joined (`oc get machine -n openshift-machine-api` shows its NODE)",
        &format!(
            "stop its MachineSet first (`oc scale machineset {MACHINE_SET} -n openshift-machine-api"
        ),
        "and pause any autoscaler",
    ] {
        assert!(
            out.stderr.contains(want),
            "missing {want:?} in {}",
            out.stderr
        );
    }
    let (code, report) = check_json(&cluster, "machineosconfig/worker", &[]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["release"]["rules"], serde_json::json!(["4.21"]));
    assert_eq!(report["blockingNodes"], serde_json::json!([]));
    let joining = &report["joiningMachines"][0];
    assert_eq!(joining["machine"], format!("{NAMESPACE}/{MACHINE}"));
    assert_eq!(joining["machineSet"], MACHINE_SET);
    assert_eq!(joining["image"], build.image.as_str());
    assert_eq!(joining["machineOSBuild"], build.mosb.as_str());
    assert_image_in_registry(&cluster, &build.image_ref().expect("image")).await;

    // The machine boots on: it pulls the image, its Node registers on it.
    cluster.sim.release_machine(MACHINE);
    let node = wait_machine_joined(&cluster, MACHINE).await;
    let a = node_annotations(&cluster.client, &node)
        .await
        .expect("read node");
    assert_eq!(a.get(CURRENT_IMAGE), Some(&build.image), "{a:?}");
    assert_eq!(a.get(DESIRED_IMAGE), Some(&build.image), "{a:?}");
    assert_eq!(a.get(STATE).map(String::as_str), Some(STATE_DONE));
    cluster.nodes.push(node);
    wait_rolled_out(&cluster, &build.image).await;

    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "delete once the machine joined: {out:?}");
    wait_image_deleted(&cluster, &build.image_ref().expect("image")).await;
    wait_pool_reverted(&cluster).await;
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// 4.21, unguarded, [`SimConfig::real_timing`]: the deletion removes the image the held machine
/// was served; released, its first boot fails on it and no Node registers. The pool shows
/// nothing: its nodes are fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_21_unguarded_deletion_fails_the_joining_machines_first_boot() {
    let (cluster, _, build, boot) = scaled_up_while_layered(Release::V4_21, false).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    assert_eq!(boot.image.as_deref(), Some(build.image.as_str()));

    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}");
    let image = build.image_ref().expect("image");
    wait_image_deleted(&cluster, &image).await;
    wait_build_gone(&cluster, &build.mosb).await;

    cluster.sim.release_machine(MACHINE);
    let error = wait_first_boot_failed(&cluster, MACHINE).await;
    let digest = image.digest.clone().expect("digest");
    for want in [
        "machine-config-daemon-firstboot.service: ".to_owned(),
        format!("ostree-unverified-registry:{}", build.image),
        format!("reading manifest {digest} in {}", image.repository()),
        "manifest unknown".to_owned(),
    ] {
        assert!(error.contains(&want), "missing {want:?} in {error}");
    }
    // No Node registered: the Machine stays Provisioned without nodeRef (a MachineHealthCheck
    // would replace it after its startup timeout), and the cluster has its three workers.
    let m = machine(&cluster.client, MACHINE).await.expect("machine");
    assert_eq!(machine_api::phase(&m), Some("Provisioned"), "{m:?}");
    assert_eq!(machine_api::node_ref(&m), None, "{m:?}");
    let nodes = testkit::mco::list_all(&testkit::mco::nodes(&cluster.client))
        .await
        .expect("list nodes");
    let mut names: Vec<String> = nodes.into_iter().filter_map(|n| n.metadata.name).collect();
    names.sort();
    assert_eq!(names, cluster.nodes, "no Node registered for {MACHINE}");
    wait_pool_reverted(&cluster).await;
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// 4.20, the control, guarded, [`SimConfig::real_timing`]: the Machine Config Server serves the
/// rendered config only, so the guard (4.20's rules) does not count the joining machine: the
/// deletion goes through while it joins, and it joins without the image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_20_a_joining_machine_does_not_block_the_deletion() {
    let (mut cluster, guard, build, boot) = scaled_up_while_layered(Release::V4_20, true).await;
    let _guard = guard.expect("guard");
    let watch = DegradedWatch::start(&cluster.client, "worker");
    assert_eq!(
        boot.image, None,
        "4.20's Machine Config Server serves no image"
    );

    let (code, report) = check_json(&cluster, "machineosconfig/worker", &[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["release"]["rules"], serde_json::json!(["4.20"]));
    assert_eq!(report["joiningMachines"], serde_json::json!([]));
    // The same cluster judged with 4.21's rules: the machine would block.
    let (code, report) = check_json(
        &cluster,
        "machineosconfig/worker",
        &["--openshift-version", "4.21.3"],
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(
        report["joiningMachines"][0]["machine"],
        format!("{NAMESPACE}/{MACHINE}")
    );

    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "delete while a 4.20 machine joins: {out:?}");
    wait_image_deleted(&cluster, &build.image_ref().expect("image")).await;

    cluster.sim.release_machine(MACHINE);
    let node = wait_machine_joined(&cluster, MACHINE).await;
    let a = node_annotations(&cluster.client, &node)
        .await
        .expect("read node");
    assert_eq!(
        a.get(CURRENT_CONFIG).map(String::as_str),
        Some(rendered_config("worker").as_str())
    );
    assert_eq!(a.get(CURRENT_IMAGE), None, "{a:?}");
    assert_eq!(a.get(DESIRED_IMAGE), None, "{a:?}");
    assert!(
        matches!(cluster.sim.first_boot(MACHINE).map(|b| b.outcome), Some(BootOutcome::Joined(n)) if n == node)
    );
    cluster.nodes.push(node);
    wait_pool_reverted(&cluster).await;
    assert_faithful_and_never_degraded(&cluster, &watch);
}
