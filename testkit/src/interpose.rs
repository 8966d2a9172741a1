//! A stand-in admission webhook that makes something happen at one exact moment of a command's
//! run: when the API server admits the first request the test names, the webhook first runs
//! the test's action, then admits the request. Which requests reach it is a webhook rule
//! ([`Interpose::rule`]); which one fires the action, a test on the AdmissionReview's request
//! ([`Interpose::fires`]). As a *mutating* webhook it is called before every validating one
//! (the guard's), and for a DELETE inside the storage's update, after the delete's
//! preconditions were first checked.
//!
//! Served by the guard's own TLS listener with a certificate from the control plane's CA; the
//! API server calls it as it calls any webhook. The API server loads webhook configurations
//! through an informer, so [`Interposer::start`] sends probe requests ([`Interpose::probe`])
//! until one reaches the webhook. Unregistered and stopped when dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use mosc_guard::server::listener::{self, ConnectionLimits, Limits};
use mosc_guard::server::tls::{CertFiles, ReloadingResolver};

use crate::Result;
use crate::controlplane::ControlPlane;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What to interpose on.
pub struct Interpose {
    /// The configuration's (and the certificate's) name.
    pub name: &'static str,
    /// A mutating webhook (called before the validating ones), else a validating one.
    pub mutating: bool,
    /// One entry of the webhook's `rules` (operations, apiGroups, apiVersions, resources, scope).
    pub rule: Value,
    /// Whether this request (the review's `request`) is the one that fires the action.
    pub fires: Box<dyn Fn(&Value) -> bool + Send + Sync>,
    /// Sends one request the rule matches (whether or not it fires), to tell when the API
    /// server calls the webhook.
    pub probe: Box<dyn Fn(kube::Client) -> Boxed<Result<()>> + Send + Sync>,
}

struct Shared {
    fires: Box<dyn Fn(&Value) -> bool + Send + Sync>,
    action: Box<dyn Fn() -> Boxed<()> + Send + Sync>,
    fired: AtomicBool,
    seen: AtomicUsize,
}

/// The webhook, registered; unregistered and stopped when dropped.
pub struct Interposer {
    client: kube::Client,
    name: &'static str,
    mutating: bool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Interposer {
    /// Runs `action` once, inside the admission of the first request `what.fires` picks;
    /// returns once the API server calls the webhook.
    pub async fn start<F, Fut>(cp: &ControlPlane, what: Interpose, action: F) -> Result<Interposer>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Interpose {
            name,
            mutating,
            rule,
            fires,
            probe,
        } = what;
        let shared = Arc::new(Shared {
            fires,
            action: Box::new(move || Box::pin(action())),
            fired: AtomicBool::new(false),
            seen: AtomicUsize::new(0),
        });
        let pair = cp.pki().server_cert(name, &["127.0.0.1"])?;
        let tls = ReloadingResolver::load(CertFiles {
            cert: pair.cert,
            key: pair.key,
        })?
        .server_config(None)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
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
        let config = json!({
            "metadata": {"name": name},
            "webhooks": [{
                "name": format!("{name}.interposer.test"),
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/"),
                                 "caBundle": ByteString(cp.pki().ca_pem().into_bytes())},
                "rules": [rule],
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10
            }]
        });
        let client = cp.client();
        if mutating {
            let config: MutatingWebhookConfiguration = serde_json::from_value(config)?;
            Api::<MutatingWebhookConfiguration>::all(client.clone())
                .create(&PostParams::default(), &config)
                .await?;
        } else {
            let config: ValidatingWebhookConfiguration = serde_json::from_value(config)?;
            Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .create(&PostParams::default(), &config)
                .await?;
        }
        let interposer = Interposer {
            client: client.clone(),
            name,
            mutating,
            stop: Some(stop),
        };
        crate::poll::wait_for(
            || {
                let (client, shared) = (client.clone(), Arc::clone(&shared));
                let sent = probe(client);
                async move {
                    sent.await?;
                    Ok((shared.seen.load(Ordering::SeqCst) > 0).then_some(()))
                }
            },
            Duration::from_secs(30),
            &format!("the interposing webhook {name} to be called"),
        )
        .await?;
        Ok(interposer)
    }
}

impl Drop for Interposer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let (client, name, mutating) = (self.client.clone(), self.name, self.mutating);
        tokio::spawn(async move {
            let params = DeleteParams::default();
            let _ = if mutating {
                Api::<MutatingWebhookConfiguration>::all(client)
                    .delete(name, &params)
                    .await
                    .map(|_| ())
            } else {
                Api::<ValidatingWebhookConfiguration>::all(client)
                    .delete(name, &params)
                    .await
                    .map(|_| ())
            };
        });
    }
}

async fn admit(State(shared): State<Arc<Shared>>, Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    shared.seen.fetch_add(1, Ordering::SeqCst);
    if (shared.fires)(request) && !shared.fired.swap(true, Ordering::SeqCst) {
        (shared.action)().await;
    }
    Json(crate::review::allow(&review))
}
