//! `overlays/openshift-defer` (defer mode, OpenShift's shape where it runs without OpenShift:
//! service-ca's Secret and CA injection written by the kit) on a real node: the finalizer added
//! by the pods' mutating webhook, a deletion held while the node needs the image and released
//! after, and the leader's Lease moving to another pod when its holder's pod is deleted.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use testkit::poll::wait_for;
use testkit::scenario::*;

use super::deploy::{Overlay, deploy};
use super::{NAME, NAMESPACE};

/// defer mode's finalizer.
const FINALIZER: &str = "mosc-guard.dev/wait-for-rollout";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, the image and the machine's node: `make node-test` runs it"]
async fn openshift_defer_overlay_defers_through_its_pods_and_moves_its_lease() {
    let d = deploy(Overlay::OpenShiftDefer).await;
    let client = d.cluster().client.clone();

    let rollout = d
        .cluster()
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout");
    // The finalizer taken off by hand: the pods' mutating webhook (called through the Service)
    // puts it back in the same request, as the object the API server stored shows.
    let out = d
        .kubectl(&[
            "patch",
            "machineosconfig",
            "worker",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
            "-o",
            "jsonpath={.metadata.finalizers}",
        ])
        .await;
    assert!(
        out.success() && out.stdout.contains(FINALIZER),
        "the finalizer put back by the mutating webhook: {out:?}\n{}",
        d.explain().await
    );
    let moscs = testkit::mco::moscs(&client);

    // Deleting it mid-rollout is accepted with the guard's warning, and held.
    let out = d
        .kubectl(&["delete", "machineosconfig", "worker", "--wait=false"])
        .await;
    assert!(out.success(), "{out:?}\n{}", d.explain().await);
    let want = deferral_warning(&rollout);
    assert!(
        out.stderr.contains(&want),
        "missing {want:?} in {}",
        out.stderr
    );
    let held = moscs.get("worker").await.expect("MOSC worker still there");
    assert!(held.metadata.deletion_timestamp.is_some(), "Terminating");
    assert!(finalizers(&held).iter().any(|f| f == FINALIZER), "held");

    // The leader's Lease moves to another pod when its holder's pod is deleted.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder_of = || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt(NAME).await?;
            Ok::<_, kube::Error>(lease.and_then(|l| l.spec?.holder_identity))
        }
    };
    let names: Vec<String> = d
        .pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let holder = wait_for(
        || async { Ok(holder_of().await?.filter(|h| names.contains(h))) },
        Duration::from_secs(60),
        "a pod holding the Lease",
    )
    .await;
    let holder = match holder {
        Ok(h) => h,
        Err(e) => panic!("{e}\n{}", d.explain().await),
    };
    d.kubectl_ok(&["delete", "pod", "-n", NAMESPACE, &holder, "--wait=false"])
        .await;
    // Another live pod takes it: the surviving replica, or the one replacing the deleted pod
    // (whichever asks first once the old holder has released it at shutdown).
    let old = &holder;
    let d_ref = &d;
    let successor = wait_for(
        || async move {
            let live: Vec<String> = d_ref
                .pods()
                .await
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            Ok(holder_of().await?.filter(|h| h != old && live.contains(h)))
        },
        Duration::from_secs(90),
        "another live pod holding the Lease",
    )
    .await;
    let successor = match successor {
        Ok(s) => s,
        Err(e) => panic!("{e}\n{}", d.explain().await),
    };
    eprintln!("node tier: Lease {NAME} moved from {holder} to {successor}");

    // The new leader releases the deferred deletion once the pool has settled.
    d.cluster().sim.release(&rollout.node);
    wait_rolled_out(d.cluster(), &rollout.build.image).await;
    let result = wait_for(
        || async { Ok(moscs.get_opt("worker").await?.is_none().then_some(())) },
        Duration::from_secs(90),
        "MOSC worker gone (finalizer removed by the new leader)",
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}", d.explain().await);
    }
    d.rollout_status().await;
}
