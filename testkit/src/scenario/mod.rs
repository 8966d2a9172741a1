//! The report's scenario and the steps the end-to-end tests share: a `worker` pool of plain
//! Node objects opted into image mode by a MachineOSConfig whose images live on the kit's
//! registry ([`Cluster`]), the guard registered in front of it ([`guarded`]), creating the
//! objects ([`create`]), waiting for MCO and the pools ([`wait`]), reading what happened
//! ([`read`]), MCO's paths beyond the report's ([`paths`]), machines joining a pool
//! ([`machines`]), a node the bug hurt brought back by hand ([`way_back`]), and a cluster with
//! a real node ([`node_cluster`]). Everything is re-exported here.
//!
//! A cluster plays one OpenShift release, or one side of a z-stream fix
//! ([`Cluster::seed_on`]; 4.20's late z-stream by default): its ClusterVersion says it and the
//! simulator behaves as it. MCO's pipeline beyond the report ([`pipeline`]): config changes,
//! failing builds and their fixes, pre-built images, upgrades; each step documented there.

pub mod cluster;
pub mod create;
pub mod machines;
pub mod node_cluster;
pub mod objects;
pub mod paths;
pub mod pipeline;
pub mod read;
pub mod wait;
pub mod way_back;

pub use cluster::*;
pub use create::*;
pub use machines::*;
pub use node_cluster::NodeCluster;
pub use paths::*;
pub use pipeline::*;
pub use read::*;
pub use wait::*;
pub use way_back::*;

use std::time::{Duration, Instant};

use crate::Result;
use crate::controlplane::ControlPlane;
use crate::guard::{Guard, GuardBin};
use crate::mco::{self, DESIRED_IMAGE, STATE};
use crate::registry::Registry;
use crate::release::{Release, ZStream};
use crate::simulator::{SimConfig, Simulator};
use crate::webhooks::register_validating_webhook;

impl Cluster {
    /// [`Cluster::seed_on`] 4.20, the seed's release.
    pub async fn seed(nodes: usize, sim: SimConfig) -> Result<Self> {
        Self::seed_on(Release::V4_20, nodes, sim).await
    }

    /// Starts control plane and registry (in parallel), makes the ClusterVersion say
    /// `z_stream` (a [`Release`] is its late z-stream; [`Release::early`] the other side of its
    /// cleanup fix), starts the simulator as its MCO with `sim`, and seeds pool `worker`
    /// (maxUnavailable 1) with `nodes` worker nodes.
    pub async fn seed_on(
        z_stream: impl Into<ZStream>,
        nodes: usize,
        sim: SimConfig,
    ) -> Result<Self> {
        Self::seed_with(z_stream.into(), None, nodes, sim).await
    }

    /// [`Cluster::seed`] on a control plane for a real node at `node_ip`
    /// ([`ControlPlane::start_for_node`]; the node tier's [`NodeCluster`]).
    pub async fn seed_for_node(
        node_ip: std::net::Ipv4Addr,
        nodes: usize,
        sim: SimConfig,
    ) -> Result<Self> {
        Self::seed_with(Release::V4_20.into(), Some(node_ip), nodes, sim).await
    }

    async fn seed_with(
        z_stream: ZStream,
        node_ip: Option<std::net::Ipv4Addr>,
        nodes: usize,
        sim: SimConfig,
    ) -> Result<Self> {
        let release = z_stream.release;
        let started = Instant::now();
        let (cp, registry, client) = start_servers(z_stream, node_ip).await?;
        let names = node_names(nodes);
        create_pool(&client, "worker", WORKER_ROLE_LABEL, 1).await?;
        create_nodes(
            &client,
            &names,
            WORKER_ROLE_LABEL,
            &rendered_config("worker"),
        )
        .await?;
        let sim = Simulator::start_on(z_stream, &cp, registry.host(), sim).await?;
        tracing::info!(
            "scenario: cluster seeded on OpenShift {z_stream} in {:.2?}",
            started.elapsed()
        );
        Ok(Self {
            sim,
            registry,
            cp,
            client,
            nodes: names,
            release,
            z_stream,
        })
    }

    /// [`Cluster::bare_on`] 4.20, the seed's release.
    pub async fn bare(sim: SimConfig) -> Result<Self> {
        Self::bare_on(Release::V4_20, sim).await
    }

    /// Starts control plane, registry and the simulator as `z_stream`'s MCO with `sim`, with no
    /// pool and no node: the caller builds the topology (and sets [`Cluster::nodes`] to the nodes
    /// it rolls).
    pub async fn bare_on(z_stream: impl Into<ZStream>, sim: SimConfig) -> Result<Self> {
        let z_stream = z_stream.into();
        let (cp, registry, client) = start_servers(z_stream, None).await?;
        let sim = Simulator::start_on(z_stream, &cp, registry.host(), sim).await?;
        Ok(Self {
            sim,
            registry,
            cp,
            client,
            nodes: Vec::new(),
            release: z_stream.release,
            z_stream,
        })
    }

    /// Steps 1-3 of the report: hold the first worker's daemon, create MOSC `worker`, wait for the
    /// build to succeed and the first worker to be Working with desiredImage = the new image.
    pub async fn start_layered_rollout(&self, timeout: Duration) -> Result<Rollout> {
        let node = self
            .nodes
            .first()
            .cloned()
            .ok_or("the cluster has no nodes")?;
        self.start_rollout("worker", &node, timeout).await
    }

    /// Holds `node`'s daemon, creates MOSC `pool` (named as its pool, pushing to
    /// [`Cluster::push_spec_of`] it), waits for the build to succeed and `node` to be Working
    /// with desiredImage = the new image.
    pub async fn start_rollout(
        &self,
        pool: &str,
        node: &str,
        timeout: Duration,
    ) -> Result<Rollout> {
        self.sim.hold(node);
        create_mosc(&self.client, pool, &self.push_spec_of(pool)).await?;
        let build = wait_for_build(&self.client, pool, timeout).await?;
        let client = &self.client;
        let image = &build.image;
        wait_for(
            || async move {
                let a = node_annotations(client, node).await?;
                let working = a.get(STATE).map(String::as_str) == Some(mco::STATE_WORKING);
                Ok((working && a.get(DESIRED_IMAGE) == Some(image)).then_some(()))
            },
            timeout,
            &format!("{node} to be Working with desiredImage {image}"),
        )
        .await?;
        Ok(Rollout {
            build,
            node: node.to_owned(),
        })
    }
}

/// Control plane (for a real node at `node_ip`, if given) and registry (started in parallel),
/// the ClusterVersion saying `z_stream`, and MCO's namespace.
async fn start_servers(
    z_stream: ZStream,
    node_ip: Option<std::net::Ipv4Addr>,
) -> Result<(ControlPlane, Registry, kube::Client)> {
    let control_plane = async {
        match node_ip {
            Some(ip) => ControlPlane::start_for_node(ip).await,
            None => ControlPlane::start().await,
        }
    };
    let (cp, registry) = tokio::try_join!(control_plane, Registry::start())?;
    if z_stream.version() != crate::controlplane::DEFAULT_RELEASE {
        cp.set_release(z_stream.version()).await?;
    }
    let client = cp.client();
    create_mco_namespace(&client).await?;
    Ok((cp, registry, client))
}

/// The shared per-test setup: a 4.20 cluster with a 3-node `worker` pool and a simulator at the
/// timing the test names ([`SimConfig::real_timing`] or [`SimConfig::fast`]).
pub async fn seed(timing: SimConfig) -> Cluster {
    seed_on(Release::V4_20, timing).await
}

/// [`seed`] on `z_stream` (a [`Release`] is its late z-stream).
pub async fn seed_on(z_stream: impl Into<ZStream>, timing: SimConfig) -> Cluster {
    let z_stream = z_stream.into();
    Cluster::seed_on(z_stream, 3, timing)
        .await
        .unwrap_or_else(|e| panic!("seed a {z_stream} cluster: {e}"))
}

/// A cluster with mosc-guard running and registered, and the report's steps 1-3 done: the
/// first worker is held mid-update to the new image.
pub struct Guarded {
    pub cluster: Cluster,
    pub guard: Guard,
    pub rollout: Rollout,
}

/// [`seed`] at `timing`, then a guard (`bin`) with `extra_args` registered as the validating webhook,
/// then the report's steps 1-3.
pub async fn guarded(bin: &GuardBin, timing: SimConfig, extra_args: &[&str]) -> Guarded {
    guarded_on(bin, Release::V4_20, timing, extra_args).await
}

/// [`guarded`] on a cluster playing `release` (or a z-stream of it).
pub async fn guarded_on(
    bin: &GuardBin,
    release: impl Into<ZStream>,
    timing: SimConfig,
    extra_args: &[&str],
) -> Guarded {
    let cluster = seed_on(release, timing).await;
    let guard = bin
        .serve(&cluster.cp)
        .args(extra_args)
        .start()
        .await
        .expect("mosc-guard starts");
    register_validating_webhook(&cluster.cp, &guard)
        .await
        .expect("webhook registered");
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("layered rollout starts");
    Guarded {
        cluster,
        guard,
        rollout,
    }
}
