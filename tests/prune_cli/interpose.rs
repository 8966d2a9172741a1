//! A stand-in admission webhook that makes something happen at one exact moment of `prune
//! --apply`: inside the admission of the first DELETE of a given MachineOSBuild, it runs the
//! test's action, then admits the request. It is a *mutating* webhook, so the API server calls
//! it before every validating one (the guard's), and for a DELETE inside the storage's update,
//! after the delete's preconditions were first checked: an action that changes the build makes
//! the preconditions fail on the API server's retry, an action that makes a node need the
//! build's image is what the guard's confirming read then sees. Either way the change lands
//! between `prune`'s last read and its delete, every time.
//!
//! Served by the guard's own TLS listener with a certificate from the control plane's CA; the
//! API server calls it as it calls any webhook.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use mosc_guard::server::listener::{self, ConnectionLimits, Limits};
use mosc_guard::server::tls::{CertFiles, ReloadingResolver};
use testkit::controlplane::ControlPlane;
use testkit::mco;

type Action = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

struct Shared {
    build: String,
    action: Action,
    fired: AtomicBool,
    seen: AtomicUsize,
}

/// The webhook, registered; unregistered and stopped when dropped.
pub struct Interposer {
    client: kube::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

const NAME: &str = "prune-test-interposer";
const PROBE: &str = "worker-probe";

impl Interposer {
    /// Runs `action` once, inside the admission of the first DELETE of MachineOSBuild `build`;
    /// returns once the API server calls the webhook.
    pub async fn on_delete<F, Fut>(cp: &ControlPlane, build: &str, action: F) -> Interposer
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            build: build.to_string(),
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
        let mut config: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": NAME},
            "webhooks": [{
                "name": "interposer.prune.test",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/")},
                "rules": [{"operations": ["DELETE"], "apiGroups": [mco::GROUP], "apiVersions": ["v1"],
                    "resources": ["machineosbuilds"], "scope": "Cluster"}],
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10
            }]
        }))
        .expect("configuration");
        if let Some(w) = config.webhooks.as_mut().and_then(|w| w.first_mut()) {
            w.client_config.ca_bundle = Some(ByteString(cp.pki().ca_pem().into_bytes()));
        }
        let client = cp.client();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await
            .expect("register the webhook");
        // The API server loads webhook configurations through an informer: probe with deletions
        // of a throwaway build until one reaches the webhook.
        let builds = mco::mosbs(&client);
        testkit::poll::wait_for(
            || {
                let builds = builds.clone();
                let shared = Arc::clone(&shared);
                async move {
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
        let api = Api::<MutatingWebhookConfiguration>::all(self.client.clone());
        tokio::spawn(async move {
            let _ = api.delete(NAME, &DeleteParams::default()).await;
        });
    }
}

async fn admit(State(shared): State<Arc<Shared>>, Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    shared.seen.fetch_add(1, Ordering::SeqCst);
    if request["name"] == shared.build.as_str() && !shared.fired.swap(true, Ordering::SeqCst) {
        (shared.action)().await;
    }
    Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": true}
    }))
}
