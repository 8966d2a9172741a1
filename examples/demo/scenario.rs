//! Steps 1-4 of the report, the same in every mode: opt pool worker into image mode, wait for
//! the build and for the first node to start updating, delete the MachineOSConfig at once; then
//! the mode's ending.

use testkit::controlplane::KubectlOutput;
use testkit::guard::GuardBin;
use testkit::mco::{DESIRED_IMAGE, STATE, STATE_WORKING};
use testkit::scenario::{
    Build, Cluster, node_annotations, pool_condition, wait_for, wait_for_build,
};

use crate::narrate::{NODE_COLUMNS, heading, kubectl, note, pool_line, short_image};
use crate::pool_watch::PoolWatch;
use crate::{Mode, Outcome, POOL, STEP_TIMEOUT, deferred, guarded, unguarded};

/// Steps 1-4 of the report, then what follows with or without the guard.
pub(crate) async fn scenario(
    mode: Mode,
    cluster: &Cluster,
    watch: &PoolWatch,
    bin: &GuardBin,
) -> testkit::Result<Outcome> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    let node = cluster.nodes[0].clone();

    heading("Step 1: opt pool worker into image mode");
    // The simulator freezes the first node's daemon once it is told to update, so the delete
    // below always lands while that node is mid-update (on a real cluster: a window of minutes).
    cluster.sim.hold(&node);
    let manifest = mosc_manifest(&cluster.push_spec());
    let out = kubectl(cp, &["apply", "-f", "-"], Some(&manifest)).await?;
    if !out.success() {
        return Ok(Outcome::fail("kubectl apply of the MachineOSConfig failed"));
    }
    if mode == Mode::Defer {
        let finalizers = [
            "get",
            "machineosconfig",
            POOL,
            "-o",
            "jsonpath={.metadata.finalizers}",
        ];
        let out = kubectl(cp, &finalizers, None).await?;
        if !out.stdout.contains("mosc-guard.dev/wait-for-rollout") {
            return Ok(Outcome::fail(
                "the mutating webhook did not add the finalizer",
            ));
        }
    }

    heading("Step 2: wait for the MachineOSBuild to succeed");
    let build = wait_for_build(client, POOL, STEP_TIMEOUT).await?;
    kubectl(cp, &["get", "machineosbuilds"], None).await?;

    heading("Step 3: wait until the first node starts updating to the new image");
    wait_for(
        || async {
            let a = node_annotations(client, &node).await?;
            let working = a.get(STATE).map(String::as_str) == Some(STATE_WORKING);
            let updating = pool_condition(client, POOL, "Updating")
                .await?
                .is_some_and(|c| c.is_true());
            Ok((working && updating && a.get(DESIRED_IMAGE) == Some(&build.image)).then_some(()))
        },
        STEP_TIMEOUT,
        &format!(
            "{node} to be Working with desiredImage {} and pool worker Updating",
            build.image
        ),
    )
    .await?;
    kubectl(cp, &["get", "nodes", "-o", NODE_COLUMNS], None).await?;
    note(&format!(
        "{node}: desiredImage {}, not booted yet",
        short_image(&build.image)
    ));
    pool_line(client).await?;

    heading("Step 4: delete the MachineOSConfig at once");
    let out = match mode {
        // kubectl would otherwise wait until the object is really gone.
        Mode::Defer => {
            kubectl(
                cp,
                &["delete", "machineosconfig", POOL, "--wait=false"],
                None,
            )
            .await?
        }
        _ => kubectl(cp, &["delete", "machineosconfig", POOL], None).await?,
    };
    let caught = Caught {
        cluster,
        watch,
        bin,
        node: &node,
        build: &build,
        premature: &out,
    };
    match mode {
        Mode::On => guarded::guarded(&caught).await,
        Mode::Defer => deferred::deferred(&caught).await,
        Mode::Off => unguarded::unguarded(&caught).await,
    }
}

/// Where steps 1-4 left the cluster, for the mode's ending: the node caught mid-update to the
/// build's image, and what the premature `kubectl delete` printed.
pub(crate) struct Caught<'a> {
    pub(crate) cluster: &'a Cluster,
    pub(crate) watch: &'a PoolWatch,
    /// The product binary (GUARD=off runs its `recover`).
    pub(crate) bin: &'a GuardBin,
    pub(crate) node: &'a str,
    pub(crate) build: &'a Build,
    pub(crate) premature: &'a KubectlOutput,
}

impl Caught<'_> {
    /// The ending's failure if the premature delete was refused where the mode expects it to go
    /// through (`refused` says what that means in this mode).
    pub(crate) fn refused(&self, refused: &str) -> Option<Outcome> {
        (!self.premature.success())
            .then(|| Outcome::fail(format!("{refused}: {}", self.premature.stderr.trim())))
    }
}

/// A MOSC for pool worker pushing to `push_spec`, as an admin would write it.
fn mosc_manifest(push_spec: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\n\
         kind: MachineOSConfig\n\
         metadata:\n  name: {POOL}\n\
         spec:\n  machineConfigPool: {{name: {POOL}}}\n\
         \x20 imageBuilder: {{imageBuilderType: Job}}\n\
         \x20 renderedImagePushSecret: {{name: push-secret}}\n\
         \x20 renderedImagePushSpec: {push_spec}\n\
         \x20 containerFile:\n\
         \x20 - containerfileArch: NoArch\n\
         \x20   content: |\n\
         \x20     FROM configs AS final\n\
         \x20     RUN dnf install -y cowsay && dnf clean all\n"
    )
}
