//! `rpm-ostree rebase ostree-unverified-registry:<image>` as the daemon (and a machine's first
//! boot) runs it: the image's manifest pulled with retries ([`pull`]) from the kit's registry, or
//! as a node pulls it ([`crate::node_pull`], with [`super::super::SimConfig::pull_as_node`]),
//! and rpm-ostree's error when it cannot ([`rpm_ostree_error`]; what the node's `reason` then
//! says depends on the release: [`crate::release::RebaseReason`]).

use super::super::ctx::Ctx;
use crate::image_ref::ImageRef;

/// How a pull of the desired image ended.
pub(in crate::simulator) enum Pull {
    Ok,
    /// Stopped because the node (or machine) is held.
    Held,
    /// rpm-ostree's error (the last attempt's).
    Failed(String),
}

/// `rpm-ostree rebase ostree-unverified-registry:<image>` by `who` (a node's daemon, or a
/// machine's first boot): pulls the manifest, retrying ([`super::super::SimConfig::pull_retries`],
/// MCO's backoff of ~75 s on 4.20 and ~250 s on 4.22 in a few hundred milliseconds); stops early
/// while `held()`.
pub(in crate::simulator) async fn pull(
    ctx: &Ctx,
    who: &str,
    image: &str,
    held: impl Fn() -> bool,
) -> Pull {
    let attempts = ctx.cfg.pull_retries + 1;
    let mut last_error = String::new();
    for attempt in 1..=attempts {
        if held() {
            return Pull::Held;
        }
        let result = match ImageRef::parse(image) {
            Err(e) => Err(format!("invalid image reference {image}: {e}")),
            // As a node: the ControllerConfig's credentials and CAs, the mirror sets, HTTPS.
            Ok(_) if ctx.cfg.pull_as_node => crate::node_pull::pull(&ctx.client, image).await,
            Ok(r) if !ctx.serves(&r.host) => Err(format!(
                "reading manifest {} in {}: pinging container registry {}: connection refused",
                r.reference().unwrap_or("latest"),
                r.repository(),
                r.host
            )),
            Ok(r) => {
                let reference = r.reference().unwrap_or("latest").to_owned();
                ctx.registry
                    .pull_manifest(&r.repo, &reference)
                    .await
                    .map_err(|e| format!("reading manifest {reference} in {}: {e}", r.repository()))
            }
        };
        match result {
            Ok(()) => return Pull::Ok,
            Err(e) => {
                tracing::info!(
                    "sim {who}: pull attempt {attempt}/{attempts} of {image} failed: {e}"
                );
                last_error = e;
            }
        }
        if attempt < attempts {
            tokio::time::sleep(ctx.cfg.retry_interval).await;
        }
    }
    Pull::Failed(rpm_ostree_error(image, &last_error))
}

/// The error rpm-ostree reports for a rebase whose image could not be read.
pub fn rpm_ostree_error(image: &str, cause: &str) -> String {
    format!(
        "error running rpm-ostree rebase --experimental ostree-unverified-registry:{image}: error: \
         Creating importer: failed to invoke method OpenImage: failed to invoke method OpenImage: {cause}"
    )
}
