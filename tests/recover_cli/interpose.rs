//! A stand-in admission webhook that makes something happen at one exact moment of a command's
//! run: when the API server admits the creation of an Event about a given node, the webhook
//! first runs the test's action (the node moves), then allows the Event. `recover --apply`
//! records its Event between its last read of a node and its patch, so the action lands in that
//! window every time, and the patch's `test` operations meet a node that moved.
//!
//! Served by the guard's own TLS listener with a certificate from the control plane's CA; the
//! API server calls it as it calls any webhook (`ValidatingWebhookConfiguration` on `events`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use mosc_guard::server::listener::{self, ConnectionLimits, Limits};
use mosc_guard::server::tls::{CertFiles, ReloadingResolver};
use testkit::controlplane::ControlPlane;

type Action = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

struct Shared {
    node: String,
    action: Action,
    fired: AtomicBool,
    seen: AtomicUsize,
}

/// The webhook, registered; unregistered and stopped when dropped.
pub struct Interposer {
    client: kube::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

const NAME: &str = "recover-test-interposer";

impl Interposer {
    /// Runs `action` once, inside the admission of the first Event created about node `node`,
    /// before that Event is stored; returns once the API server calls the webhook.
    pub async fn on_node_event<F, Fut>(cp: &ControlPlane, node: &str, action: F) -> Interposer
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            node: node.to_string(),
            action: Box::new(move || Box::pin(action())),
            fired: AtomicBool::new(false),
            seen: AtomicUsize::new(0),
        });
        let pair = cp
            .pki()
            .server_cert(NAME, &["127.0.0.1"])
            .expect("serving certificate");
        let tls = ReloadingResolver::load(CertFiles {
            cert: pair.cert,
            key: pair.key,
        })
        .expect("certificate loads")
        .server_config(None)
        .expect("server config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let app = Router::new()
            .route("/", post(admit))
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let limits = Limits {
                request_timeout: Duration::from_secs(10),
                shutdown_grace: Duration::from_secs(1),
                header_read_timeout: Duration::from_secs(10),
                connection: ConnectionLimits::default(),
            };
            listener::serve(listener, Arc::new(tls), app, &limits, async {
                let _ = stopped.await;
            })
            .await;
        });
        let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": NAME},
            "webhooks": [{
                "name": "interposer.recover.test",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/")},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["events"], "scope": "Namespaced"}],
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10
            }]
        }))
        .expect("configuration");
        let mut config = config;
        if let Some(w) = config.webhooks.as_mut().and_then(|w| w.first_mut()) {
            w.client_config.ca_bundle = Some(ByteString(cp.pki().ca_pem().into_bytes()));
        }
        let client = cp.client();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await
            .expect("register the webhook");
        // The API server loads webhook configurations through an informer: probe with Events
        // about another object until one reaches the webhook.
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        testkit::poll::wait_for(
            || {
                let events = events.clone();
                let shared = Arc::clone(&shared);
                async move {
                    let probe: Event = serde_json::from_value(json!({
                        "metadata": {"generateName": "interposer-probe-"},
                        "involvedObject": {"kind": "Node", "name": "interposer-probe"},
                        "reason": "Probe", "message": "is the webhook active?"
                    }))?;
                    events.create(&PostParams::default(), &probe).await?;
                    Ok((shared.seen.load(Ordering::SeqCst) > 0).then_some(()))
                }
            },
            Duration::from_secs(30),
            "the interposing webhook is called",
        )
        .await
        .expect("webhook active");
        Interposer {
            client,
            stop: Some(stop),
        }
    }
}

impl Drop for Interposer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let api = Api::<ValidatingWebhookConfiguration>::all(self.client.clone());
        tokio::spawn(async move {
            let _ = api.delete(NAME, &DeleteParams::default()).await;
        });
    }
}

async fn admit(State(shared): State<Arc<Shared>>, Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    shared.seen.fetch_add(1, Ordering::SeqCst);
    let about = &request["object"]["involvedObject"];
    if about["kind"] == "Node"
        && about["name"] == shared.node.as_str()
        && !shared.fired.swap(true, Ordering::SeqCst)
    {
        (shared.action)().await;
    }
    Json(testkit::review::allow(&review))
}
