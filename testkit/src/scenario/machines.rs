//! Machines joining a pool, as steps: a MachineSet scaling up ([`scale_up`]), and waiting for
//! the machine's Ignition to be served, for it to join (its Node registered) or for its first
//! boot to fail.

use kube::api::DynamicObject;

use super::cluster::{Cluster, STEP_TIMEOUT};
use super::wait::wait_for;
use crate::Result;
use crate::machine_api;
use crate::simulator::{BootOutcome, FirstBoot};

/// MachineSet `machine_set` scales up by Machine `machine` for `pool` (booting from
/// `<pool>-user-data`), its first boot held after the Ignition fetch when `hold` (so a test can
/// act between the Machine Config Server serving it and the machine pulling the image).
pub async fn scale_up(
    cluster: &Cluster,
    machine: &str,
    machine_set: &str,
    pool: &str,
    hold: bool,
) -> Result<()> {
    if hold {
        cluster.sim.hold_machine(machine);
    }
    machine_api::create_machine(&cluster.client, machine, machine_set, pool).await
}

/// Machine `name` in `openshift-machine-api`.
pub async fn machine(client: &kube::Client, name: &str) -> Result<DynamicObject> {
    Ok(machine_api::machines(client).get(name).await?)
}

/// Waits until machine `name` has fetched its Ignition (it is Provisioned, its first boot
/// under way or held) and returns what the Machine Config Server served it.
pub async fn wait_ignition_served(cluster: &Cluster, name: &str) -> FirstBoot {
    wait_for(
        || async { Ok(cluster.sim.first_boot(name)) },
        STEP_TIMEOUT,
        &format!("machine {name} to fetch its Ignition"),
    )
    .await
    .unwrap_or_else(|e| panic!("machine {name} boots: {e}"))
}

/// Waits until machine `name` has joined: its Node registered, the Machine `Running` with
/// `status.nodeRef` naming it. Returns the Node's name.
pub async fn wait_machine_joined(cluster: &Cluster, name: &str) -> String {
    let client = &cluster.client;
    wait_for(
        || async {
            let m = machine(client, name).await?;
            let node = machine_api::node_ref(&m)
                .filter(|_| machine_api::phase(&m) == Some("Running"))
                .map(str::to_owned);
            let Some(node) = node else {
                return Ok(None);
            };
            Ok(crate::mco::nodes(client)
                .get_opt(&node)
                .await?
                .map(|_| node))
        },
        STEP_TIMEOUT,
        &format!("machine {name} to join (Running, its Node registered)"),
    )
    .await
    .unwrap_or_else(|e| panic!("machine {name} joins: {e}"))
}

/// Waits until machine `name`'s first boot has failed and returns its error (what the serial
/// console shows).
pub async fn wait_first_boot_failed(cluster: &Cluster, name: &str) -> String {
    wait_for(
        || async {
            Ok(cluster
                .sim
                .first_boot(name)
                .and_then(|boot| match boot.outcome {
                    BootOutcome::Failed(reason) => Some(reason),
                    BootOutcome::Booting | BootOutcome::Joined(_) => None,
                }))
        },
        STEP_TIMEOUT,
        &format!("machine {name}'s first boot to fail"),
    )
    .await
    .unwrap_or_else(|e| panic!("machine {name}'s first boot fails: {e}"))
}
