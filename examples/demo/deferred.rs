//! GUARD=defer's ending: the premature delete accepted with a warning, the MachineOSConfig held
//! Terminating until the rollout finished, then released.

use std::time::Instant;

use testkit::mco;
use testkit::scenario::wait_for;

use crate::cluster_state::{build_and_image_kept, left_image_mode};
use crate::narrate::{EVENT_COLUMNS, MOSC_COLUMNS, heading, kubectl, note};
use crate::scenario::Caught;
use crate::{Outcome, POOL, STEP_TIMEOUT};

/// GUARD=defer after the premature delete: accepted with a warning naming the node; the
/// MachineOSConfig stays Terminating (image and build kept) until the rollout finished, then
/// mosc-guard releases it and the pool leaves image mode, never degrading.
pub(crate) async fn deferred(caught: &Caught<'_>) -> testkit::Result<Outcome> {
    let Caught {
        cluster,
        watch,
        node,
        build,
        premature,
        ..
    } = *caught;
    let (cp, client) = (&cluster.cp, &cluster.client);
    if let Some(failed) = caught.refused("in defer mode the delete was refused") {
        return Ok(failed);
    }
    let mut problems = Vec::new();
    if !premature.stderr.contains("deferred") || !premature.stderr.contains(node) {
        problems.push(format!(
            "the delete went through without a deferral warning naming {node}: {}",
            premature.stderr.trim()
        ));
    }
    let held = mco::moscs(client).get_opt(POOL).await?;
    if held.is_none_or(|m| m.metadata.deletion_timestamp.is_none()) {
        return Ok(Outcome::fail(
            "MachineOSConfig worker is not Terminating after the deferred delete",
        ));
    }
    if !build_and_image_kept(cluster, build).await? {
        problems.push("after the deferred delete the build or its image is gone".to_owned());
    }
    kubectl(cp, &["get", "machineosconfig", "-o", MOSC_COLUMNS], None).await?;
    note("deferred: Terminating, held by the finalizer; its build and its image stay");

    heading(
        "Step 5: nobody acts; MCO finishes the rollout, then mosc-guard lets the deletion complete",
    );
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update; the nodes update one at a time"
    ));
    let started = Instant::now();
    wait_for(
        || async {
            Ok(mco::moscs(client)
                .get_opt(POOL)
                .await?
                .is_none()
                .then_some(()))
        },
        STEP_TIMEOUT,
        "mosc-guard to release MachineOSConfig worker",
    )
    .await?;
    note(&format!(
        "MachineOSConfig worker gone {:.1} s after the node resumed",
        started.elapsed().as_secs_f64()
    ));
    kubectl(
        cp,
        &["get", "events", "-n", "default", "-o", EVENT_COLUMNS],
        None,
    )
    .await?;
    let updates = left_image_mode(cluster, watch, build, &mut problems).await?;
    Ok(Outcome {
        problems,
        summary: format!(
            "mosc-guard accepted the premature delete with a warning naming {node}, held the \
             MachineOSConfig until the rollout finished and then let it go; pool worker was never \
             Degraded ({updates} pool states watched) and ends Updated."
        ),
    })
}
