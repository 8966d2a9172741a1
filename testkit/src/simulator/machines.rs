//! The Machine API provisioning Machines, and their first boot (openshift/machine-api-operator's
//! machine controller and nodelink controller, an AWS-like actuator, and the instance itself):
//!
//! - a new Machine goes `Provisioning`; once its cloud instance exists
//!   ([`super::SimConfig::provision_delay`]) it gets `spec.providerID`, the instance-state
//!   annotation, `status.addresses` and `status.providerStatus`, and goes `Provisioned`;
//! - the instance boots ([`super::SimConfig::boot_delay`]): its pointer Ignition (the Secret
//!   `spec.providerSpec.value.userDataSecret.name`) sends it to the Machine Config Server's
//!   `/config/<pool>`, which serves as [`super::mcs`] says; with a layered image,
//!   `machine-config-daemon-firstboot` pulls it by digest from the registry (with the daemon's
//!   retries) before the kubelet starts;
//! - it joins: the Node registers (the pool's role label, the Machine's `spec.metadata.labels`,
//!   its providerID, and the node annotations the MCS served: currentConfig = desiredConfig,
//!   currentImage = desiredImage = the image, state Done), the Machine gets `status.nodeRef` and
//!   goes `Running`;
//! - or its first boot fails (the image is gone): no Node ever registers, and the Machine stays
//!   `Provisioned` with no nodeRef and no `errorMessage`, as on a real cluster: the machine
//!   controller sets `Failed` (and an errorMessage) only for terminal actuator errors (an invalid
//!   spec, an instance deleted behind its back), and a running instance without a Node is
//!   requeued as Provisioned forever (a MachineHealthCheck's `nodeStartupTimeout`, not simulated,
//!   would replace it). The console's error is kept for tests ([`super::Simulator::first_boot`]).
//!
//! No Machine finalizer and no deletion: tests scale up, never down.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use super::boot::{BootOutcome, FirstBoot};
use super::ctx::Ctx;
use super::daemon::{Pull, pull};
use super::mcs;
use super::reconcile::{Reconciler, is_conflict, now_rfc3339};
use crate::Result;
use crate::machine_api::{self, INSTANCE_STATE};
use crate::mco::{
    self, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE, STATE_DONE, str_at,
};

/// Node annotation the nodelink controller sets: the Machine (`<namespace>/<name>`).
const MACHINE_ANNOTATION: &str = "machine.openshift.io/machine";

pub(super) struct MachineApi {
    ctx: Ctx,
    /// Machine uid -> its phase, and when this process first saw it in that phase.
    seen: HashMap<String, (String, Instant)>,
    /// Machines (uid) whose instance booted: a first boot happens once.
    booted: HashSet<String>,
    /// Machines (uid) waiting for their user-data Secret (logged once).
    waiting: HashSet<String>,
    // Dropping the set (when the loop is aborted) aborts the running boots.
    boots: JoinSet<()>,
    /// A machine was on its way to a node at the last pass (its phase's delay runs).
    on_the_way: bool,
}

impl MachineApi {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            seen: HashMap::new(),
            booted: HashSet::new(),
            waiting: HashSet::new(),
            boots: JoinSet::new(),
            on_the_way: false,
        }
    }

    /// Whether `machine` still has a phase to go through before its first boot.
    fn on_the_way(&self, machine: &DynamicObject) -> bool {
        let uid = machine.metadata.uid.as_deref().unwrap_or_default();
        machine.metadata.deletion_timestamp.is_none()
            && match machine_api::phase(machine).unwrap_or_default() {
                "" | "Provisioning" => true,
                "Provisioned" => {
                    machine_api::node_ref(machine).is_none() && !self.booted.contains(uid)
                }
                _ => false,
            }
    }

    /// How long `uid` has been in `phase` (by this process's clock).
    fn in_phase_for(&mut self, uid: &str, phase: &str) -> std::time::Duration {
        let entry = self
            .seen
            .entry(uid.to_owned())
            .or_insert_with(|| (phase.to_owned(), Instant::now()));
        if entry.0 != phase {
            *entry = (phase.to_owned(), Instant::now());
        }
        entry.1.elapsed()
    }

    async fn sync_machine(&mut self, machine: &DynamicObject) -> Result<()> {
        let (Some(uid), Some(name)) = (machine.metadata.uid.clone(), machine.metadata.name.clone())
        else {
            return Ok(());
        };
        if machine.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let phase = machine_api::phase(machine).unwrap_or_default().to_owned();
        let elapsed = self.in_phase_for(&uid, &phase);
        match phase.as_str() {
            "" => set_status(&self.ctx, machine, json!({"phase": "Provisioning"})).await,
            "Provisioning" if elapsed >= self.ctx.cfg.provision_delay => {
                self.create_instance(machine, &uid).await
            }
            "Provisioned"
                if machine_api::node_ref(machine).is_none()
                    && elapsed >= self.ctx.cfg.boot_delay
                    && self.booted.insert(uid) =>
            {
                tracing::info!("sim machine-api: machine {name}'s instance boots");
                let (ctx, machine) = (self.ctx.clone(), machine.clone());
                self.boots.spawn(async move {
                    if let Err(e) = first_boot(&ctx, &machine).await {
                        tracing::warn!("sim firstboot {name}: {e}");
                    }
                });
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The actuator's create: the cloud instance (providerID, instance state, addresses), then
    /// Provisioned. Waits while the pointer Ignition's Secret is missing (the actuator's
    /// "failed to get user data", requeued).
    async fn create_instance(&mut self, machine: &DynamicObject, uid: &str) -> Result<()> {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let namespace = machine.metadata.namespace.clone().unwrap_or_default();
        let secret = user_data_secret(machine).unwrap_or_default();
        if secrets_in(&self.ctx, &namespace)
            .get_opt(&secret)
            .await?
            .is_none()
        {
            if self.waiting.insert(uid.to_owned()) {
                tracing::warn!(
                    "sim machine-api: machine {name}: failed to get user data: secret {namespace}/{secret:?} not found"
                );
            }
            return Ok(());
        }
        let instance = Instance::of(uid, machine);
        let patch = json!({
            "metadata": {"annotations": {INSTANCE_STATE: "running"}},
            "spec": {"providerID": instance.provider_id},
        });
        self.ctx
            .write(
                &format!("creating the instance of machine {name}"),
                machines_in(&self.ctx, &namespace).patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ),
            )
            .await?;
        let status = json!({
            "phase": "Provisioned",
            "addresses": [
                {"type": "InternalIP", "address": instance.ip},
                {"type": "InternalDNS", "address": instance.hostname},
                {"type": "Hostname", "address": instance.hostname},
            ],
            "providerStatus": {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "AWSMachineProviderStatus",
                "instanceId": instance.id,
                "instanceState": "running",
            },
        });
        set_status(&self.ctx, machine, status).await?;
        tracing::info!(
            "sim machine-api: machine {name}: instance {} is running; Provisioned",
            instance.id
        );
        Ok(())
    }
}

impl Reconciler for MachineApi {
    async fn sync(&mut self) -> Result<()> {
        while self.boots.try_join_next().is_some() {}
        let machines = self
            .ctx
            .list(&machine_api::all_machines(&self.ctx.client))
            .await?;
        self.on_the_way = machines.iter().any(|m| self.on_the_way(m));
        for machine in &machines {
            self.sync_machine(machine).await?;
        }
        Ok(())
    }

    fn waiting(&self) -> bool {
        self.on_the_way || !self.boots.is_empty()
    }
}

/// A Machine's cloud instance, derived from its uid (stable, distinct per machine).
struct Instance {
    id: String,
    provider_id: String,
    ip: String,
    hostname: String,
}

impl Instance {
    fn of(uid: &str, machine: &DynamicObject) -> Self {
        let hash: Vec<u8> = Sha256::digest(uid.as_bytes()).to_vec();
        let id: String = hash
            .iter()
            .take(9)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()[..17]
            .to_owned();
        let placement = |key: &str, default: &str| {
            str_at(
                &machine.data,
                &["spec", "providerSpec", "value", "placement", key],
            )
            .unwrap_or(default)
            .to_owned()
        };
        let (zone, region) = (
            placement("availabilityZone", "us-east-2a"),
            placement("region", "us-east-2"),
        );
        let (a, b) = (128 + hash[10] % 100, 1 + hash[11] % 250);
        Self {
            provider_id: format!("aws:///{zone}/i-{id}"),
            id: format!("i-{id}"),
            ip: format!("10.0.{a}.{b}"),
            hostname: format!("ip-10-0-{a}-{b}.{region}.compute.internal"),
        }
    }
}

fn user_data_secret(machine: &DynamicObject) -> Option<String> {
    str_at(
        &machine.data,
        &["spec", "providerSpec", "value", "userDataSecret", "name"],
    )
    .map(str::to_owned)
}

/// Patches a Machine's status (merged with `lastUpdated`, as the machine controller writes it).
async fn set_status(ctx: &Ctx, machine: &DynamicObject, mut status: Value) -> Result<()> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    let namespace = machine.metadata.namespace.clone().unwrap_or_default();
    if let Some(s) = status.as_object_mut() {
        s.insert("lastUpdated".to_owned(), Value::String(now_rfc3339()));
    }
    let phase = status.get("phase").cloned().unwrap_or(Value::Null);
    let api = machines_in(ctx, &namespace);
    ctx.write(
        &format!("status of machine {name}"),
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        ),
    )
    .await?;
    tracing::info!("sim machine-api: machine {namespace}/{name} is {phase}");
    Ok(())
}

/// Machines in `namespace`.
fn machines_in(ctx: &Ctx, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        ctx.client.clone(),
        namespace,
        &machine_api::machine_resource(),
    )
}

/// Secrets in `namespace`.
fn secrets_in(ctx: &Ctx, namespace: &str) -> Api<Secret> {
    Api::namespaced(ctx.client.clone(), namespace)
}

/// One machine's first boot: fetch the Ignition, pull the served image, register the Node.
async fn first_boot(ctx: &Ctx, machine: &DynamicObject) -> Result<()> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    let (pool, served) = fetch_ignition(ctx, machine).await;
    tracing::info!(
        "sim mcs: served /config/{pool} to machine {name}: config {}, image {}",
        served.config,
        served
            .image
            .as_deref()
            .unwrap_or("<none: the base OS image>")
    );
    let record = |outcome: BootOutcome| {
        let boot = FirstBoot {
            pool: pool.clone(),
            config: served.config.clone(),
            image: served.image.clone(),
            outcome,
        };
        ctx.update_knobs(|k| {
            k.boots.insert(name.clone(), boot);
        });
    };
    record(BootOutcome::Booting);
    let held = || ctx.knobs(|k| k.held_machines.contains(&name));
    loop {
        while held() {
            tokio::time::sleep(ctx.cfg.poll_interval).await;
        }
        let Some(image) = &served.image else { break };
        match pull(ctx, &format!("firstboot {name}"), image, held).await {
            Pull::Ok => break,
            Pull::Held => continue,
            Pull::Failed(reason) => {
                let reason = format!("machine-config-daemon-firstboot.service: {reason}");
                tracing::warn!(
                    "sim firstboot {name}: {reason}; the kubelet never starts, no Node registers"
                );
                record(BootOutcome::Failed(reason));
                return Ok(());
            }
        }
    }
    let node = register_node(ctx, machine, &pool, &served).await?;
    record(BootOutcome::Joined(node));
    Ok(())
}

/// The pointer Ignition's pool and what the Machine Config Server serves for it; retried (as
/// Ignition retries its fetch) until it answers.
async fn fetch_ignition(ctx: &Ctx, machine: &DynamicObject) -> (String, mcs::Served) {
    let mut last_error = String::new();
    loop {
        match try_fetch_ignition(ctx, machine).await {
            Ok(fetched) => return fetched,
            Err(e) => {
                let e = e.to_string();
                if e != last_error {
                    tracing::warn!(
                        "sim firstboot {}: fetching Ignition: {e} (retrying)",
                        machine.metadata.name.as_deref().unwrap_or_default()
                    );
                    last_error = e;
                }
            }
        }
        tokio::time::sleep(ctx.cfg.poll_interval).await;
    }
}

async fn try_fetch_ignition(ctx: &Ctx, machine: &DynamicObject) -> Result<(String, mcs::Served)> {
    let namespace = machine.metadata.namespace.clone().unwrap_or_default();
    let secret_name = user_data_secret(machine).unwrap_or_default();
    let secret = secrets_in(ctx, &namespace).get(&secret_name).await?;
    let pool_name = machine_api::pointer_pool(&secret)
        .ok_or_else(|| format!("secret {secret_name} holds no pointer Ignition"))?;
    let pool = mco::mcps(&ctx.client).get(&pool_name).await?;
    let moscs = ctx.list(&mco::moscs(&ctx.client)).await?;
    let mosbs = ctx.list(&mco::mosbs(&ctx.client)).await?;
    let served = mcs::serve(ctx.release(), &pool, &moscs, &mosbs)?;
    Ok((pool_name, served))
}

/// The kubelet registers the Node, with the node annotations the MCS served; the nodelink
/// controller links it to the Machine, which goes Running. Returns the Node's name.
async fn register_node(
    ctx: &Ctx,
    machine: &DynamicObject,
    pool: &str,
    served: &mcs::Served,
) -> Result<String> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    let namespace = machine.metadata.namespace.clone().unwrap_or_default();
    let fresh = machines_in(ctx, &namespace).get(&name).await?;
    let instance = Instance::of(fresh.metadata.uid.as_deref().unwrap_or_default(), &fresh);
    let role = if pool == "master" { "master" } else { "worker" };
    let mut labels = BTreeMap::from([
        (
            "kubernetes.io/hostname".to_owned(),
            instance.hostname.clone(),
        ),
        (mco::OS_LABEL.to_owned(), "linux".to_owned()),
        ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ("node.openshift.io/os_id".to_owned(), "rhel".to_owned()),
        (format!("node-role.kubernetes.io/{role}"), String::new()),
    ]);
    if let Some(extra) = fresh
        .data
        .pointer("/spec/metadata/labels")
        .and_then(Value::as_object)
    {
        labels.extend(
            extra
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())),
        );
    }
    let mut annotations = BTreeMap::from([
        (CURRENT_CONFIG.to_owned(), served.config.clone()),
        (DESIRED_CONFIG.to_owned(), served.config.clone()),
        (STATE.to_owned(), STATE_DONE.to_owned()),
        (MACHINE_ANNOTATION.to_owned(), format!("{namespace}/{name}")),
        // The daemon's first run (`completeUpdate`) and the node controller's topology.
        (
            mco::DESIRED_DRAIN.to_owned(),
            mco::uncordon_request(&served.config),
        ),
        (
            mco::LAST_APPLIED_DRAIN.to_owned(),
            mco::uncordon_request(&served.config),
        ),
        (
            mco::CONTROL_PLANE_TOPOLOGY.to_owned(),
            mco::TOPOLOGY_HIGHLY_AVAILABLE.to_owned(),
        ),
    ]);
    if let Some(image) = &served.image {
        annotations.insert(CURRENT_IMAGE.to_owned(), image.clone());
        annotations.insert(DESIRED_IMAGE.to_owned(), image.clone());
    }
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": instance.hostname, "labels": labels, "annotations": annotations},
        "spec": {"providerID": instance.provider_id},
    }))?;
    let nodes = mco::nodes(&ctx.client);
    let created = match ctx
        .write(
            &format!("registering node {}", instance.hostname),
            nodes.create(&PostParams::default(), &node),
        )
        .await
    {
        Ok(n) => n,
        Err(e) if is_conflict(&e) => nodes.get(&instance.hostname).await?,
        Err(e) => return Err(e.into()),
    };
    crate::kubelet::report_boot(&ctx.client, &instance.hostname).await?;
    let node_ref = json!({
        "kind": "Node",
        "name": instance.hostname,
        "uid": created.metadata.uid.unwrap_or_default(),
    });
    set_status(
        ctx,
        &fresh,
        json!({"phase": "Running", "nodeRef": node_ref}),
    )
    .await?;
    Ok(instance.hostname)
}
