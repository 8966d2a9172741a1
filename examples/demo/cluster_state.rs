//! What the story checks on the cluster: the build and its image kept or gone, the pool settled
//! on an image, and the pool leaving image mode without degrading.

use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, STATE, STATE_DONE};
use testkit::scenario::{Build, Cluster, mosbs_of, node_annotations, pool_condition, wait_for};

use crate::narrate::{condition_status, note, pool_count, pool_line, short_image};
use crate::pool_watch::PoolWatch;
use crate::{NODE_COUNT, POOL, STEP_TIMEOUT};

/// After the real deletion: MCO deletes the image and the build and the pool reverts to the
/// base OS image, never Degraded. Adds what went wrong to `problems`; returns how many pool
/// states the watch saw.
pub(crate) async fn left_image_mode(
    cluster: &Cluster,
    watch: &PoolWatch,
    build: &Build,
    problems: &mut Vec<String>,
) -> testkit::Result<usize> {
    let client = &cluster.client;
    image_and_build_gone(cluster, build).await?;
    note(&format!(
        "MCO deleted {} from the registry and MachineOSBuild {}",
        short_image(&build.image),
        build.mosb
    ));
    wait_for(
        || async { pool_settled(cluster, None).await },
        STEP_TIMEOUT,
        "every worker back on the base OS image and pool worker Updated",
    )
    .await?;
    note("the nodes rebased to the base OS image; none needed the deleted image");
    pool_line(client).await?;

    let seen = watch.snapshot();
    if let Some(degraded) = &seen.degraded {
        problems.push(format!(
            "pool worker was Degraded at some point: {degraded}"
        ));
    }
    if seen.relists > 0 {
        problems.push(format!(
            "the pool watch re-listed {} time(s), so a transient Degraded may have been missed",
            seen.relists
        ));
    }
    let updated = pool_condition(client, POOL, "Updated").await?;
    if !updated.as_ref().is_some_and(|c| c.is_true()) {
        problems.push(format!("pool worker does not end Updated: {updated:?}"));
    }
    Ok(seen.updates)
}

/// Whether the build's image is still in the registry and a MachineOSBuild of MOSC worker
/// still exists.
pub(crate) async fn build_and_image_kept(
    cluster: &Cluster,
    build: &Build,
) -> testkit::Result<bool> {
    let image = build.image_ref()?;
    let digest = image
        .digest
        .clone()
        .ok_or("the build's image has no digest")?;
    let image_kept = cluster
        .registry
        .manifest_status(&image.repo, &digest)
        .await?
        .is_none();
    Ok(image_kept && !mosbs_of(&cluster.client, POOL).await?.is_empty())
}

/// Waits until the registry answers "manifest unknown" for the build's image and no
/// MachineOSBuild of MOSC worker is left.
pub(crate) async fn image_and_build_gone(cluster: &Cluster, build: &Build) -> testkit::Result<()> {
    let image = build.image_ref()?;
    let digest = image
        .digest
        .clone()
        .ok_or("the build's image has no digest")?;
    wait_for(
        || async {
            let gone = cluster
                .registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            let builds = mosbs_of(&cluster.client, POOL).await?;
            Ok((gone && builds.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "MCO to delete the build's image and the MachineOSBuild",
    )
    .await
}

/// `Some(())` once every worker is Done with desiredImage = currentImage = `image` (`None`: no
/// image annotations) and pool worker is Updated with every machine updated.
pub(crate) async fn pool_settled(
    cluster: &Cluster,
    image: Option<&str>,
) -> testkit::Result<Option<()>> {
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await?;
        let get = |k: &str| a.get(k).map(String::as_str).filter(|v| !v.is_empty());
        if get(STATE) != Some(STATE_DONE)
            || get(DESIRED_IMAGE) != image
            || get(CURRENT_IMAGE) != image
        {
            return Ok(None);
        }
    }
    let pool = mco::mcps(&cluster.client).get(POOL).await?;
    let updated = condition_status(&pool, "Updated") == "True";
    let count = |k: &str| pool_count(&pool, k);
    Ok((updated && count("updatedMachineCount") == NODE_COUNT.to_string()).then_some(()))
}
