//! Making something happen between `recover --apply`'s last read of a node and its patch: the
//! kit's interposing webhook ([`testkit::interpose`]) on CREATEs of Events. `recover --apply`
//! records its Event about the node between that read and the patch, so the action lands in that
//! window every time, and the patch meets a node that moved (or is gone).

use std::future::Future;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;

use testkit::controlplane::ControlPlane;
use testkit::interpose::{Interpose, Interposer};

/// Runs `action` once, inside the admission of the first Event created about node `node`,
/// before that Event is stored; returns once the API server calls the webhook.
pub async fn on_node_event<F, Fut>(cp: &ControlPlane, node: &str, action: F) -> Interposer
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let node = node.to_string();
    let what = Interpose {
        name: "recover-test-interposer",
        mutating: false,
        rule: json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                     "resources": ["events"], "scope": "Namespaced"}),
        fires: Box::new(move |request| {
            let about = &request["object"]["involvedObject"];
            about["kind"] == "Node" && about["name"] == node.as_str()
        }),
        probe: Box::new(|client| Box::pin(probe(client))),
    };
    Interposer::start(cp, what, action)
        .await
        .expect("interposing webhook")
}

/// An Event about another node (one the rule matches and that fires nothing).
async fn probe(client: kube::Client) -> testkit::Result<()> {
    let events: Api<Event> = Api::namespaced(client, "default");
    let probe: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "interposer-probe-"},
        "involvedObject": {"kind": "Node", "name": "interposer-probe"},
        "reason": "Probe", "message": "is the webhook active?"
    }))?;
    events.create(&PostParams::default(), &probe).await?;
    Ok(())
}
