//! `prune`'s images, live: the repositories the MachineOSConfigs and MachineOSBuilds name
//! ([`crate::core::prune::images::push_repositories`]), each listed and resolved as MCO reaches it
//! ([`Registries`]: the push secret, the ControllerConfig's CAs and proxy), then planned
//! ([`crate::core::prune::images::plan_images`]). Anything that cannot be read leaves the
//! repositories it concerns unlisted, with the reason; the builds' plan goes on.

use kube::Client;

use crate::access::registry::{PullConfigError, Registries};
use crate::core::prune::images::{ImagePlan, plan_images, push_repositories};
use crate::core::snapshot::Snapshot;

/// The images plan for `snapshot` from the live cluster, how its registries were reached, and
/// notes for the report.
pub(super) async fn plan_live(
    client: &Client,
    snapshot: &Snapshot,
) -> (ImagePlan, Option<Registries>, Vec<String>) {
    let sources = push_repositories(snapshot);
    if sources.is_empty() {
        return (ImagePlan::default(), None, Vec::new());
    }
    let registries = match Registries::read(client, &sources).await {
        Ok(registries) => registries,
        Err(e @ PullConfigError::NoControllerConfig) => {
            let why = format!(
                "{e}; MCO reaches its registries with the ControllerConfig's CAs, and without one \
                 neither MCO nor prune can"
            );
            return (ImagePlan::skipped(why), None, Vec::new());
        }
        Err(e) => return (ImagePlan::skipped(e.to_string()), None, Vec::new()),
    };
    let notes = registries
        .internal_unknown()
        .map(|why| {
            format!(
                "{why}: a tag on a host that may be OpenShift's internal registry is kept (only \
             *.openshift-image-registry.svc and a Route's generated host tell without the lists)"
            )
        })
        .into_iter()
        .collect();
    let listings = futures::future::join_all(sources.iter().map(|s| registries.listing(s))).await;
    (plan_images(snapshot, &listings), Some(registries), notes)
}
