//! The cluster a scenario runs on, and what its steps hand each other: the type every step
//! takes ([`Cluster`]), its constants, and the build and rollout it catches.

use std::time::Duration;

use crate::Result;
use crate::cli::CliRun;
use crate::controlplane::ControlPlane;
use crate::guard::GuardBin;
use crate::image_ref::ImageRef;
use crate::node_registry::SecureFace;
use crate::registry::Registry;
use crate::release::{Release, ZStream};
use crate::simulator::Simulator;

/// Label that puts a node into the worker pool.
pub const WORKER_ROLE_LABEL: &str = "node-role.kubernetes.io/worker";

/// Hash part of the pools' rendered MachineConfig names (there is no render controller here).
pub const RENDERED_HASH: &str = "5f4c2e8b9d0a1c3e7b6f8d2a4c9e1b3d";

/// Repository of the built images, as on OpenShift's internal registry.
pub const OCB_REPO: &str = "openshift-machine-config-operator/ocb-image";

/// Generous bound for each wait. At the real builder's timing ([`SimConfig::real_timing`]) a
/// build takes 6-7 s and a delete event is handled 5 s late; a passing step needs at most ~10 s.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Names like OpenShift's AWS worker nodes, in the order the node controller picks them.
pub fn node_names(count: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "ip-10-0-{}-{}.us-east-2.compute.internal",
                11 + 16 * i,
                240 - 37 * (i % 6)
            )
        })
        .collect();
    names.sort();
    names
}

/// `spec.renderedImagePushSpec` for a MOSC on the harness registry.
pub fn push_spec(registry_host: &str) -> String {
    format!("{registry_host}/{OCB_REPO}:latest")
}

/// The rendered MachineConfig a pool made by [`create_pool`] targets.
pub fn rendered_config(pool: &str) -> String {
    format!("rendered-{pool}-{RENDERED_HASH}")
}

/// Everything the scenario runs on: control plane, registry, simulator, the `worker` pool and
/// its nodes. Fields drop in order: simulator first, control plane last.
pub struct Cluster {
    pub sim: Simulator,
    pub registry: Registry,
    pub cp: ControlPlane,
    pub client: kube::Client,
    /// The nodes the scenario rolls out to (the seeded workers), sorted: the node controller
    /// updates them in this order.
    pub nodes: Vec<String>,
    /// The OpenShift release the cluster was seeded on.
    pub release: Release,
    /// The z-stream of [`Cluster::release`] it was seeded on.
    pub z_stream: ZStream,
}

impl Cluster {
    /// The MOSC push spec on this cluster's registry.
    pub fn push_spec(&self) -> String {
        push_spec(self.registry.host())
    }

    /// The push spec of the MOSC of `pool`: [`Cluster::push_spec`] for `worker`, a tag named
    /// after the pool for any other (MCO deletes a build's image by its tag, so two pools
    /// pushing to one tag would delete each other's images).
    pub fn push_spec_of(&self, pool: &str) -> String {
        match pool {
            "worker" => self.push_spec(),
            other => format!("{}/{OCB_REPO}:{other}", self.registry.host()),
        }
    }

    /// The registry as MCO and the nodes reach a production one: the kit's registry behind TLS
    /// and token auth (deletes allowed or not), the simulator building, pulling and deleting
    /// there too, and the ControllerConfig with the nodes' pull secret and its CA. A
    /// MachineOSConfig pushes there with [`push_spec`]`(face.host())`.
    pub async fn registry_behind_tls(&self, deletes: bool) -> Result<SecureFace> {
        let face = SecureFace::over_with(&self.registry, deletes).await?;
        self.sim.registry_also_at(face.host());
        face.install_controller_config(&self.client).await?;
        Ok(face)
    }

    /// `mosc-guard ARGS --kubeconfig <admin>` (`bin`), run as [`crate::cli`] runs it.
    pub fn run_cli(&self, bin: &GuardBin, args: &[&str]) -> CliRun {
        bin.cli().args(args).kubeconfig(self.cp.kubeconfig()).run()
    }

    /// `mosc-guard check TARGET EXTRA...` against the live control plane.
    pub fn check(&self, bin: &GuardBin, target: &str, extra: &[&str]) -> CliRun {
        let mut args = vec!["check", target];
        args.extend_from_slice(extra);
        self.run_cli(bin, &args)
    }
}

/// How a layered rollout was caught: the build and the node held mid-update to its image.
#[derive(Debug, Clone)]
pub struct Rollout {
    pub build: Build,
    /// The node caught (the first worker in the report's scenario): state Working,
    /// desiredImage = the build's image, daemon held.
    pub node: String,
}

/// A succeeded build: its name and digested image.
#[derive(Debug, Clone)]
pub struct Build {
    pub mosb: String,
    /// `<repo>@sha256:<hex>`.
    pub image: String,
}

impl Build {
    /// The image split into host, repository and digest.
    pub fn image_ref(&self) -> Result<ImageRef> {
        ImageRef::parse(&self.image)
    }
}

/// The `reason` the cluster's release leaves on a node whose rebase to `image` (gone from the
/// kit's registry) failed ([`crate::release::Row::rebase_reason`]).
pub fn lost_image_reason(cluster: &Cluster, image: &str) -> String {
    let (digest, repository) = crate::image_ref::ImageRef::parse(image)
        .ok()
        .map(|r| (r.digest.clone().unwrap_or_default(), r.repository()))
        .unwrap_or_default();
    let error = crate::simulator::rpm_ostree_error(
        image,
        &format!("reading manifest {digest} in {repository}: manifest unknown"),
    );
    let release = cluster.sim.controller_z_stream().release;
    release.row().rebase_reason.reason(image, &error)
}
