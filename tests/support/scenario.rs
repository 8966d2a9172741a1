//! The report's scenario: a `worker` pool of plain Node objects opted into image mode by a MOSC
//! whose images live on the harness registry; plus wait helpers and readers for assertions.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use super::Result;
use super::controlplane::ControlPlane;
use super::image_ref::ImageRef;
use super::mco::{
    self, CURRENT_CONFIG, CURRENT_MOSB, DESIRED_CONFIG, DESIRED_IMAGE, LABEL_MOSC, STATE,
    STATE_DONE, str_at,
};
use super::registry::Registry;
use super::simulator::{MCO_NAMESPACE, SimConfig, Simulator};

/// Label that puts a node into the worker pool.
pub const WORKER_ROLE_LABEL: &str = "node-role.kubernetes.io/worker";
/// Hash part of the pools' rendered MachineConfig names (there is no render controller here).
pub const RENDERED_HASH: &str = "5f4c2e8b9d0a1c3e7b6f8d2a4c9e1b3d";
/// Repository of the built images, as on OpenShift's internal registry.
pub const OCB_REPO: &str = "openshift-machine-config-operator/ocb-image";

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

/// Creates a MachineConfigPool selecting nodes labelled `<role_label>: ""`.
pub async fn create_pool(
    client: &kube::Client,
    name: &str,
    role_label: &str,
    max_unavailable: u32,
) -> Result<()> {
    create_pool_selecting(
        client,
        name,
        json!({"matchLabels": {role_label: ""}}),
        max_unavailable,
    )
    .await
}

/// Creates a MachineConfigPool whose `spec.nodeSelector` is `node_selector` (a
/// `metav1.LabelSelector`, e.g. `{}` for one that MCO treats as selecting nothing).
pub async fn create_pool_selecting(
    client: &kube::Client,
    name: &str,
    node_selector: Value,
    max_unavailable: u32,
) -> Result<()> {
    let mut pool = DynamicObject::new(name, &mco::mcp_resource()).data(json!({
        "spec": {
            "nodeSelector": node_selector,
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "maxUnavailable": max_unavailable,
            "paused": false,
            "configuration": {"name": rendered_config(name)},
        }
    }));
    pool.metadata.labels = Some(BTreeMap::from([(
        format!("pools.operator.machineconfiguration.openshift.io/{name}"),
        String::new(),
    )]));
    mco::mcps(client)
        .create(&PostParams::default(), &pool)
        .await?;
    tracing::info!(
        "scenario: created MachineConfigPool {name} (nodeSelector {node_selector}, maxUnavailable \
         {max_unavailable})"
    );
    Ok(())
}

/// Creates plain Node objects in the pool of `role_label`, settled on `rendered_config` as MCO
/// leaves them (state Done, current = desired config, no image annotations).
pub async fn create_nodes(
    client: &kube::Client,
    names: &[String],
    role_label: &str,
    rendered_config: &str,
) -> Result<()> {
    create_labelled_nodes(client, names, &[(role_label, "")], rendered_config).await
}

/// Creates plain Linux Node objects carrying `labels` (e.g. several role labels), settled on
/// `rendered_config` as MCO leaves them (state Done, current = desired config, no image
/// annotations).
pub async fn create_labelled_nodes(
    client: &kube::Client,
    names: &[String],
    labels: &[(&str, &str)],
    rendered_config: &str,
) -> Result<()> {
    for name in names {
        let mut node_labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), name.clone()),
            (mco::OS_LABEL.to_owned(), "linux".to_owned()),
            ("node.openshift.io/os_id".to_owned(), "rhel".to_owned()),
        ]);
        node_labels.extend(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": node_labels,
                "annotations": {
                    CURRENT_CONFIG: rendered_config,
                    DESIRED_CONFIG: rendered_config,
                    STATE: STATE_DONE,
                },
            },
        }))?;
        mco::nodes(client)
            .create(&PostParams::default(), &node)
            .await?;
    }
    tracing::info!(
        "scenario: created {} nodes: {}",
        names.len(),
        names.join(", ")
    );
    Ok(())
}

/// Creates the namespace MCO's build objects live in (the installer creates it on a real
/// cluster; the simulator's builds need it).
pub async fn create_mco_namespace(client: &kube::Client) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": MCO_NAMESPACE},
    }))?;
    let api: Api<Namespace> = Api::all(client.clone());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates the MachineOSConfig `pool` (its name must equal the pool's) pushing to `push_spec`.
pub async fn create_mosc(client: &kube::Client, pool: &str, push_spec: &str) -> Result<()> {
    let mosc = DynamicObject::new(pool, &mco::mosc_resource()).data(json!({
        "spec": {
            "machineConfigPool": {"name": pool},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": push_spec,
            "containerFile": [{"containerfileArch": "NoArch",
                               "content": "FROM configs AS final\nRUN dnf install -y cowsay && dnf clean all\n"}],
        }
    }));
    mco::moscs(client)
        .create(&PostParams::default(), &mosc)
        .await?;
    tracing::info!("scenario: created MachineOSConfig {pool} pushing to {push_spec}");
    Ok(())
}

/// Polls `check` every 100 ms until it yields `Some`, erring after `timeout` with `what` and the
/// last error `check` returned (errors count as "not yet").
pub async fn wait_for<T, F, Fut>(mut check: F, timeout: Duration, what: &str) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let started = Instant::now();
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(v)) => {
                tracing::info!("scenario: {what} (after {:.2?})", started.elapsed());
                return Ok(v);
            }
            Ok(None) => {}
            Err(e) => last_error = Some(e.to_string()),
        }
        if started.elapsed() >= timeout {
            let detail = last_error
                .map(|e| format!("; last error: {e}"))
                .unwrap_or_default();
            return Err(format!("timed out after {timeout:?} waiting for: {what}{detail}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// All annotations of a node.
pub async fn node_annotations(
    client: &kube::Client,
    node: &str,
) -> Result<BTreeMap<String, String>> {
    Ok(mco::nodes(client)
        .get(node)
        .await?
        .metadata
        .annotations
        .unwrap_or_default())
}

/// One annotation of a node (`key` is the full key, e.g. [`mco::DESIRED_IMAGE`]).
pub async fn node_annotation(
    client: &kube::Client,
    node: &str,
    key: &str,
) -> Result<Option<String>> {
    Ok(node_annotations(client, node)
        .await?
        .remove(key)
        .filter(|v| !v.is_empty()))
}

/// A condition of a MachineConfigPool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCondition {
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl PoolCondition {
    /// Whether the status is "True".
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The pool's conditions by type.
pub async fn pool_conditions(
    client: &kube::Client,
    pool: &str,
) -> Result<BTreeMap<String, PoolCondition>> {
    let pool = mco::mcps(client).get(pool).await?;
    let conditions = pool
        .data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(conditions
        .iter()
        .map(|c| {
            let cond = PoolCondition {
                status: text(c, "status"),
                reason: text(c, "reason"),
                message: text(c, "message"),
            };
            (text(c, "type"), cond)
        })
        .collect())
}

/// One condition of the pool, if reported.
pub async fn pool_condition(
    client: &kube::Client,
    pool: &str,
    type_: &str,
) -> Result<Option<PoolCondition>> {
    Ok(pool_conditions(client, pool).await?.remove(type_))
}

/// The MachineOSBuilds of a MOSC (by the machine-os-config label).
pub async fn mosbs_of(client: &kube::Client, mosc: &str) -> Result<Vec<DynamicObject>> {
    let selector = format!("{LABEL_MOSC}={mosc}");
    Ok(mco::mosbs(client)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
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

/// Waits until the MOSC's build succeeded and the MOSC points at its image.
pub async fn wait_for_build(client: &kube::Client, mosc: &str, timeout: Duration) -> Result<Build> {
    wait_for(
        || async {
            let Some(m) = mco::moscs(client).get_opt(mosc).await? else {
                return Ok(None);
            };
            // 4.20 names the current build by annotation only (no status.machineOSBuild).
            let current = m
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CURRENT_MOSB));
            let (Some(image), Some(name)) = (
                str_at(&m.data, &["status", "currentImagePullSpec"]),
                current.filter(|n| !n.is_empty()),
            ) else {
                return Ok(None);
            };
            let b = mco::mosbs(client).get_opt(name).await?;
            let built = |b: &DynamicObject| {
                mco::condition_true(b, "Succeeded")
                    && str_at(&b.data, &["status", "digestedImagePushSpec"]) == Some(image)
            };
            Ok(b.filter(built).map(|_| Build {
                mosb: name.to_owned(),
                image: image.to_owned(),
            }))
        },
        timeout,
        &format!("MachineOSBuild of {mosc} to succeed"),
    )
    .await
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
}

/// How a layered rollout was caught: the build and the node held mid-update to its image.
#[derive(Debug, Clone)]
pub struct Rollout {
    pub build: Build,
    /// The node caught (the first worker in the report's scenario): state Working,
    /// desiredImage = the build's image, daemon held.
    pub node: String,
}

impl Cluster {
    /// Starts control plane and registry (in parallel), the simulator with `sim`, and seeds pool
    /// `worker` (maxUnavailable 1) with `nodes` worker nodes.
    pub async fn seed(nodes: usize, sim: SimConfig) -> Result<Self> {
        let started = Instant::now();
        let (cp, registry, client) = start_servers().await?;
        let names = node_names(nodes);
        create_pool(&client, "worker", WORKER_ROLE_LABEL, 1).await?;
        create_nodes(
            &client,
            &names,
            WORKER_ROLE_LABEL,
            &rendered_config("worker"),
        )
        .await?;
        let sim = Simulator::start(client.clone(), registry.host(), sim)?;
        tracing::info!("scenario: cluster seeded in {:.2?}", started.elapsed());
        Ok(Self {
            sim,
            registry,
            cp,
            client,
            nodes: names,
        })
    }

    /// Starts control plane, registry and the simulator with `sim`, with no pool and no node:
    /// the caller builds the topology (and sets [`Cluster::nodes`] to the nodes it rolls).
    pub async fn bare(sim: SimConfig) -> Result<Self> {
        let (cp, registry, client) = start_servers().await?;
        let sim = Simulator::start(client.clone(), registry.host(), sim)?;
        Ok(Self {
            sim,
            registry,
            cp,
            client,
            nodes: Vec::new(),
        })
    }

    /// The MOSC push spec on this cluster's registry.
    pub fn push_spec(&self) -> String {
        push_spec(self.registry.host())
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

    /// Holds `node`'s daemon, creates MOSC `pool` (named as its pool), waits for the build to
    /// succeed and `node` to be Working with desiredImage = the new image.
    pub async fn start_rollout(
        &self,
        pool: &str,
        node: &str,
        timeout: Duration,
    ) -> Result<Rollout> {
        self.sim.hold(node);
        create_mosc(&self.client, pool, &self.push_spec()).await?;
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

/// Control plane and registry (started in parallel), and MCO's namespace.
async fn start_servers() -> Result<(ControlPlane, Registry, kube::Client)> {
    let (cp, registry) = tokio::try_join!(ControlPlane::start(), Registry::start())?;
    let client = cp.client();
    create_mco_namespace(&client).await?;
    Ok((cp, registry, client))
}

/// The rendered MachineConfig a pool made by [`create_pool`] targets.
pub fn rendered_config(pool: &str) -> String {
    format!("rendered-{pool}-{RENDERED_HASH}")
}
