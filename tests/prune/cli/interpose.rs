//! Making something happen between `prune --apply`'s last read of a build and its delete: the
//! kit's interposing webhook ([`testkit::interpose`]) as a *mutating* webhook on DELETEs of
//! MachineOSBuilds, so its action lands inside the admission of the build's delete, before the
//! guard's validating webhook is called and after the delete's preconditions were first checked.
//! A change to the build makes the preconditions fail on the API server's retry; a node sent to
//! the build's image is what the guard's confirming read then sees. Either way, every time.

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::interpose::{Interpose, Interposer};
use testkit::mco;

const PROBE: &str = "worker-probe";

/// What the action patches (a merge patch).
#[derive(Clone)]
pub enum Target {
    Node(&'static str),
    Build(String),
}

/// Patches `target` with `patch` inside the admission of the first DELETE of MachineOSBuild
/// `build`; returns once the API server calls the webhook.
pub async fn on_delete(cp: &ControlPlane, build: &str, target: Target, patch: Value) -> Interposer {
    let fires = build.to_string();
    let what = Interpose {
        name: "prune-test-interposer",
        mutating: true,
        rule: json!({"operations": ["DELETE"], "apiGroups": [mco::GROUP], "apiVersions": ["v1"],
                     "resources": ["machineosbuilds"], "scope": "Cluster"}),
        fires: Box::new(move |request| request["name"] == fires.as_str()),
        probe: Box::new(|client| Box::pin(probe(client))),
    };
    let client = cp.client();
    Interposer::start(cp, what, move || {
        let (client, patch, target) = (client.clone(), Patch::Merge(patch.clone()), target.clone());
        async move {
            let params = PatchParams::default();
            let patched = match target {
                Target::Node(node) => mco::nodes(&client)
                    .patch(node, &params, &patch)
                    .await
                    .map(|_| ()),
                Target::Build(build) => mco::mosbs(&client)
                    .patch(&build, &params, &patch)
                    .await
                    .map(|_| ()),
            };
            patched.expect("the interposed change");
        }
    })
    .await
    .expect("interposing webhook")
}

/// Creates and deletes a throwaway build (a DELETE the rule matches).
async fn probe(client: kube::Client) -> testkit::Result<()> {
    let builds = mco::mosbs(&client);
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": {"name": PROBE},
        "spec": {"machineOSConfig": {"name": "probe"},
                 "machineConfig": {"name": "rendered-probe-0"},
                 "renderedImagePushSpec": format!("{}:{PROBE}", super::REPO)}
    }))?;
    match builds.create(&PostParams::default(), &probe).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    builds.delete(PROBE, &DeleteParams::default()).await?;
    Ok(())
}
