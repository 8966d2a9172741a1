//! A scenario cluster on a control plane for a real node, with that node
//! ([`crate::node::Node`]): what the node tier (`tests/node/`) runs the shipped Deployment on.

use crate::Result;
use crate::node::{Node, node_ip};
use crate::simulator::SimConfig;

use super::cluster::Cluster;

/// A scenario cluster ([`Cluster`], on a control plane for a node) with a real [`Node`]: the
/// node drops first, while the API server can still delete its pods.
pub struct NodeCluster {
    pub node: Node,
    pub cluster: Cluster,
}

impl NodeCluster {
    /// Seeds a 4.20 cluster with `workers` simulated workers on a control plane for a node
    /// ([`Cluster::seed_for_node`]), then starts the node with `images`.
    pub async fn start(workers: usize, sim: SimConfig, images: &[&str]) -> Result<Self> {
        let ip = node_ip()?;
        let cluster = Cluster::seed_for_node(ip, workers, sim).await?;
        let node = Node::start(&cluster.cp, images).await?;
        Ok(Self { node, cluster })
    }
}
