//! The shipped manifests as an admin runs them: `kubectl apply -k` of an overlay on a control
//! plane with a real node (kubelet and kube-proxy from the pinned Kubernetes module, Debian's
//! containerd, runc and CNI bridge: `testkit::node`), the guard running as the Deployment's two
//! pods from the image `make image` built, reached by the API server through its Service.
//!
//! Every test here is `#[ignore]`d: plain `cargo test` lists them as ignored (they need root,
//! the image and the machine's one node). The node tier runs them: `make node-test`
//! (`hack/node.sh test`) builds the image, sets `MOSC_GUARD_IMAGE` and runs them with
//! `--include-ignored --test-threads=1`; `make test` does the same where the prerequisites
//! hold, else reports the tier SKIPPED with the reason (`hack/node.sh ci`). This is the only
//! test binary that starts a node.
//!
//! What is checked, per overlay ([`deploy`] installs it):
//! - [`deny`]: `overlays/cert-manager` (the serving certificate written as the Secret
//!   cert-manager writes, the CA injected as its cainjector does: no cert-manager runs here).
//!   The pods start under the manifests' securityContext (checked in /proc: the user, no
//!   capabilities, no new privileges, seccomp, a read-only root), the probes answer, the
//!   ServiceAccount token and in-cluster configuration work; the report's scenario: denied
//!   with the message while a node is mid-update, allowed once the pool settled. Then an
//!   admin's first hour: a replica evicted as a drain does (within the PodDisruptionBudget,
//!   which records it), a replica deleted and the Deployment rolled while a client keeps
//!   sending dry-run deletes (0 failed or wrong answers), the Secret rotated (served by the
//!   same pods, no restart), the NetworkPolicy applied and selecting the pods, and the pods'
//!   memory (cgroup) against the manifests' limit.
//! - [`defer`]: `overlays/openshift-defer` (service-ca's Secret and CA injection written by the
//!   kit): the finalizer added through the pods, the deletion held while the node needs the
//!   image and released after, and the Lease moving when its holder's pod is deleted.

mod defer;
mod deny;
mod deploy;
mod traffic;

use std::time::Duration;

use testkit::guard::GuardBin;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

/// The guard's namespace and the name of its objects, as the manifests have them.
const NAMESPACE: &str = "mosc-guard";
const NAME: &str = "mosc-guard";

/// Bound of each wait for the Deployment (a rollout of two pods waits for each new pod's
/// readiness probe, and each old pod drains for serve's 10 s `--shutdown-delay`).
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(240);

/// The image under test: `MOSC_GUARD_IMAGE`, which the node tier sets.
fn image() -> String {
    match std::env::var("MOSC_GUARD_IMAGE") {
        Ok(image) if !image.is_empty() => image,
        _ => panic!(
            "MOSC_GUARD_IMAGE is not set: these tests run the built image on a real node; \
             `make node-test` builds it and sets it"
        ),
    }
}
