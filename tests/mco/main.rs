//! The guard against MCO's behaviour as the kit's simulator plays it on a real control plane and
//! registry: the report's scenario ([`seed_scenario`]), each release's rules ([`releases`]),
//! MCO's other paths ([`builds`], [`recreate_and_rollback`], [`pipeline`], [`daemon`],
//! [`topologies`]), and the harness itself ([`harness_smoke`], [`crd_contract`]).

mod builds;
mod crd_contract;
mod daemon;
mod harness_smoke;
mod pipeline;
mod recreate_and_rollback;
mod releases;
mod seed_scenario;
mod topologies;
