//! GUARD=off's ending: the report reproduced, the delete goes through, the image is deleted and
//! the pool goes NodeDegraded; then the way back with `mosc-guard recover` ([`crate::recovery`]).

use testkit::mco::REASON;
use testkit::scenario::{pool_condition, wait_for};

use crate::cluster_state::image_and_build_gone;
use crate::narrate::{escape_key, heading, kubectl, note, pool_line, short_image};
use crate::recovery;
use crate::scenario::Caught;
use crate::{Outcome, POOL, STEP_TIMEOUT};

/// GUARD=off after the premature delete: it goes through, MCO deletes the image, and the held
/// node, once it resumes, fails "manifest unknown": the pool goes NodeDegraded. Then the admin
/// heals it with `mosc-guard recover`.
pub(crate) async fn unguarded(caught: &Caught<'_>) -> testkit::Result<Outcome> {
    let Caught {
        cluster,
        watch,
        node,
        build,
        ..
    } = *caught;
    let (cp, client) = (&cluster.cp, &cluster.client);
    if let Some(failed) = caught.refused("without the guard, kubectl delete failed") {
        return Ok(failed);
    }
    image_and_build_gone(cluster, build).await?;
    note(&format!(
        "MCO deleted {} from the registry and MachineOSBuild {}",
        short_image(&build.image),
        build.mosb
    ));

    heading("Step 5: the node mid-update tries to pull the deleted image");
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update (MCO retries ~75 s; here ~1 s)"
    ));
    let degraded = wait_for(
        || async {
            Ok(pool_condition(client, POOL, "NodeDegraded")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        "pool worker to report NodeDegraded=True",
    )
    .await?;
    let reason_path = format!("jsonpath={{.metadata.annotations.{}}}", escape_key(REASON));
    let out = kubectl(cp, &["get", "node", node, "-o", &reason_path], None).await?;
    pool_line(client).await?;
    note(&format!(
        "NodeDegraded: {}; MCO does not recover from this by itself, on any release",
        degraded.reason
    ));

    let mut problems = Vec::new();
    if !out.stdout.contains("manifest unknown") {
        problems.push(format!(
            "{node}'s reason does not say \"manifest unknown\": {}",
            out.stdout.trim()
        ));
    }
    if !degraded.message.contains("manifest unknown") {
        problems.push(format!(
            "pool worker's NodeDegraded message does not say \"manifest unknown\": {}",
            degraded.message
        ));
    }
    if watch.snapshot().degraded.is_none() {
        problems.push("the pool watch never saw the pool Degraded".to_owned());
    }
    if problems.is_empty() {
        recovery::recover(cluster, caught.bin, node, &mut problems).await?;
    }
    Ok(Outcome {
        problems,
        summary: format!(
            "the report reproduced without mosc-guard: the delete went through, the image was \
             deleted and pool worker went NodeDegraded ({node}: \"manifest unknown\"); then \
             `mosc-guard recover --apply` cancelled the lost target, {node} came back without a \
             reboot and pool worker recovered (Updated, not degraded)."
        ),
    })
}
