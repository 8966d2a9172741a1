//! Polling until a condition holds ([`wait_for`]) or an object is gone ([`wait_gone`]): the
//! one wait loop every part of the kit (control plane, scenario, simulator checks) uses.

use std::future::Future;
use std::time::{Duration, Instant};

use kube::api::Api;

use crate::Result;

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

/// Waits until `api` no longer has the object `name` (its finalizers removed, or foreground
/// deletion done); errs after `timeout`.
pub async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(
        || async { Ok(api.get_opt(name).await?.is_none().then_some(())) },
        timeout,
        &format!("{name} to be gone"),
    )
    .await
}
