//! What a trial observes: the pool's nodes and their images, the MachineOSConfig and its
//! builds, and which nodes still need an image (the oracle for a false allow).

use super::*;

/// A node as one list showed it.
#[derive(Clone, Debug)]
pub(super) struct NodeSeen {
    pub(super) rv: String,
    pub(super) desired: Option<String>,
    pub(super) current: Option<String>,
    pub(super) state: Option<String>,
}

pub(super) fn annotation(node: &Node, key: &str) -> Option<String> {
    mco::node_annotation(node, key).map(str::to_owned)
}

/// A consistent list of the trial's nodes (one resourceVersion).
pub(super) async fn read_nodes(
    client: &kube::Client,
    pool: &str,
) -> testkit::Result<BTreeMap<String, NodeSeen>> {
    let list = mco::nodes(client)
        .list(&ListParams::default().labels(&role_label(pool)))
        .await?;
    Ok(list
        .items
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                NodeSeen {
                    rv: n.metadata.resource_version.clone().unwrap_or_default(),
                    desired: annotation(n, DESIRED_IMAGE),
                    current: annotation(n, CURRENT_IMAGE),
                    state: annotation(n, STATE),
                },
            )
        })
        .collect())
}

/// What the oracle reads before and after a deletion.
#[derive(Clone, Debug)]
pub(super) struct Snapshot {
    pub(super) nodes: BTreeMap<String, NodeSeen>,
    pub(super) mosc: Option<DynamicObject>,
    pub(super) mosbs: Vec<DynamicObject>,
    pub(super) pool: Option<DynamicObject>,
}

pub(super) async fn snapshot(client: &kube::Client, pool: &str) -> testkit::Result<Snapshot> {
    let nodes = read_nodes(client, pool).await?;
    let mosbs = mco::mosbs(client)
        .list(&ListParams::default().labels(&format!("{LABEL_MOSC}={pool}")))
        .await?
        .items;
    let mosc = mco::moscs(client).get_opt(pool).await?;
    let pool = mco::mcps(client).get_opt(pool).await?;
    Ok(Snapshot {
        nodes,
        mosc,
        mosbs,
        pool,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Mosc(String),
    Mosb(String),
}

impl Target {
    pub(super) fn describe(&self) -> String {
        match self {
            Target::Mosc(n) => format!("machineosconfig/{n}"),
            Target::Mosb(n) => format!("machineosbuild/{n}"),
        }
    }
}

pub(super) fn image_of(mosb: &DynamicObject) -> Option<String> {
    str_at(&mosb.data, &["status", "digestedImagePushSpec"]).map(str::to_owned)
}

pub(super) fn mosc_current_image(mosc: &DynamicObject) -> Option<String> {
    str_at(&mosc.data, &["status", "currentImagePullSpec"]).map(str::to_owned)
}

impl Snapshot {
    /// The images a deletion of `target` would remove (README, "Policy semantics").
    pub(super) fn images(&self, target: &Target) -> BTreeSet<String> {
        match target {
            Target::Mosc(_) => self
                .mosbs
                .iter()
                .filter_map(image_of)
                .chain(self.mosc.as_ref().and_then(mosc_current_image))
                .collect(),
            Target::Mosb(name) => self
                .mosbs
                .iter()
                .filter(|b| b.metadata.name.as_deref() == Some(name))
                .filter_map(image_of)
                .collect(),
        }
    }

    /// Nodes whose desiredImage is one of `images` and not reached yet.
    pub(super) fn blocking(&self, images: &BTreeSet<String>) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| {
                n.desired
                    .as_ref()
                    .is_some_and(|d| images.contains(d) && n.current.as_ref() != Some(d))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The pool rule: not paused, its MachineOSConfig's current image one of `images`, MCO
    /// still sending nodes to it (the build for the pool's `spec.configuration` Succeeded with
    /// that image: `canLayeredContinue`), a node not on it yet (whatever the pool's conditions
    /// say).
    pub(super) fn pool_rolling(&self, images: &BTreeSet<String>) -> bool {
        let Some(pool) = &self.pool else { return false };
        let paused = pool
            .data
            .get("spec")
            .and_then(|s| s.get("paused"))
            .and_then(Value::as_bool)
            == Some(true);
        let Some(image) = self.mosc.as_ref().and_then(mosc_current_image) else {
            return false;
        };
        let rendered = str_at(&pool.data, &["spec", "configuration", "name"]);
        let continues = self.mosbs.iter().any(|b| {
            str_at(&b.data, &["spec", "machineConfig", "name"]) == rendered
                && mco::condition_true(b, "Succeeded")
                && image_of(b).as_deref() == Some(image.as_str())
        });
        !paused
            && continues
            && images.contains(&image)
            && self
                .nodes
                .values()
                .any(|n| n.current.as_deref() != Some(image.as_str()))
    }

    pub(super) fn safe(&self, target: &Target) -> bool {
        let images = self.images(target);
        self.blocking(&images).is_empty() && !self.pool_rolling(&images)
    }

    pub(super) fn mosc_has_finalizer(&self) -> bool {
        self.mosc.as_ref().is_some_and(|m| {
            m.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        })
    }
}

/// Blocking nodes of `before` that `after` still shows unchanged (same resourceVersion).
pub(super) fn still_blocking(
    before: &BTreeMap<String, NodeSeen>,
    blocking: &[String],
    after: &BTreeMap<String, NodeSeen>,
) -> Vec<String> {
    blocking
        .iter()
        .filter(|n| matches!((before.get(*n), after.get(*n)), (Some(b), Some(a)) if a.rv == b.rv))
        .cloned()
        .collect()
}

pub(super) fn role_label(pool: &str) -> String {
    format!("node-role.kubernetes.io/{pool}")
}
