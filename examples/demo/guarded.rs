//! GUARD=on's ending: the premature delete denied naming the node, the same delete allowed
//! once the rollout finished.

use kube::api::DeleteParams;
use testkit::mco;
use testkit::scenario::wait_for;

use crate::cluster_state::{build_and_image_kept, left_image_mode, pool_settled};
use crate::narrate::{NODE_COLUMNS, heading, kubectl, note, pool_line};
use crate::scenario::Caught;
use crate::{Outcome, POOL, STEP_TIMEOUT};

/// GUARD=on after the premature delete: it must have been denied naming the node; then the
/// rollout finishes, the delete goes through, and the pool leaves image mode, never degrading.
pub(crate) async fn guarded(caught: &Caught<'_>) -> testkit::Result<Outcome> {
    let Caught {
        cluster,
        watch,
        node,
        build,
        premature,
        ..
    } = *caught;
    let (cp, client) = (&cluster.cp, &cluster.client);
    if premature.success() {
        return Ok(Outcome::fail(
            "the premature `kubectl delete machineosconfig worker` succeeded: mosc-guard did not deny it",
        ));
    }
    let mut problems = Vec::new();
    if !premature.stderr.contains("denied the request") || !premature.stderr.contains(node) {
        problems.push(format!(
            "the premature delete failed, but not with a denial naming {node}: {}",
            premature.stderr.trim()
        ));
    }
    if mco::moscs(client).get_opt(POOL).await?.is_none() {
        return Ok(Outcome::fail(
            "kubectl delete failed, yet MachineOSConfig worker is gone",
        ));
    }
    if !build_and_image_kept(cluster, build).await? {
        problems.push("after the denial the build or its image is gone".to_owned());
    }
    note("denied: the MachineOSConfig, its build and its image stay");
    pool_line(client).await?;

    heading("Step 5: the admin waits until the rollout finished (UPDATED=True)");
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update; the nodes update one at a time"
    ));
    wait_for(
        || async { pool_settled(cluster, Some(&build.image)).await },
        STEP_TIMEOUT,
        "every worker Done on the image and pool worker Updated",
    )
    .await?;
    kubectl(cp, &["get", "nodes", "-o", NODE_COLUMNS], None).await?;
    pool_line(client).await?;
    // The guard decides denials from its watch caches; give them the moment they need to see
    // the last node Done (a server-side dry run has no side effects).
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        || async {
            match mco::moscs(client).delete(POOL, &dry_run).await {
                Ok(_) => Ok(Some(())),
                Err(e) => Err(e.into()),
            }
        },
        STEP_TIMEOUT,
        "mosc-guard to allow a dry-run delete of MachineOSConfig worker",
    )
    .await?;

    heading("Step 6: delete the MachineOSConfig again; the pool leaves image mode");
    let out = kubectl(cp, &["delete", "machineosconfig", POOL], None).await?;
    if !out.success() {
        problems.push(format!(
            "the delete after the rollout failed: {}",
            out.stderr.trim()
        ));
        return Ok(Outcome {
            problems,
            summary: String::new(),
        });
    }
    let updates = left_image_mode(cluster, watch, build, &mut problems).await?;
    Ok(Outcome {
        problems,
        summary: format!(
            "mosc-guard denied the premature delete (naming {node}) and allowed it after the \
             rollout; pool worker was never Degraded ({updates} pool states watched) and ends Updated."
        ),
    })
}
