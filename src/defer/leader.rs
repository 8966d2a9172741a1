//! Leader election through a coordination.k8s.io Lease: every replica serves admission, only the
//! holder runs the finalizer controller. Leadership avoids doing the work twice, it is not what
//! makes removals safe: each is decided from a fresh read and written with a patch guarded by
//! resourceVersion. Expiry follows client-go: a candidate takes over once the Lease's
//! resourceVersion has not changed for a lease duration by its own clock (so clock skew does not
//! matter); a holder that cannot renew within its deadline steps down first. Hand-written: why not
//! `kube-lease-manager` is in docs/design.md, "Crates tried, and why not".

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

use crate::telemetry::metrics::Metrics;

/// Where the Lease lives and how this replica takes part.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a silent holder keeps the Lease; a dead leader is replaced after about this
    /// plus one retry period.
    pub duration: Duration,
    /// How often the holder renews, and a candidate retries.
    pub retry_period: Duration,
    /// A holder that could not renew for this long steps down (before others take over).
    pub renew_deadline: Duration,
}

impl LeaseSettings {
    pub fn new(namespace: String, name: String, identity: String) -> Self {
        Self {
            namespace,
            name,
            identity,
            duration: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(7),
        }
    }
}

/// What a replica does after reading the Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// It holds the Lease: renew it.
    Renew,
    /// Free, given up or expired: take it.
    TakeOver,
    /// Someone else holds it and renewed within the lease duration.
    Wait,
}

/// Decides from the Lease's spec and how long its resourceVersion has stayed unchanged.
pub fn decide(spec: &LeaseSpec, me: &str, unchanged_for: Duration) -> Move {
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == me => Move::Renew,
        None | Some("") => Move::TakeOver,
        Some(_) => {
            let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
            let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
            if unchanged_for >= duration {
                Move::TakeOver
            } else {
                Move::Wait
            }
        }
    }
}

/// One replica's side of the election.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    /// The Lease's last seen resourceVersion and when this replica first saw it.
    observed: Option<(String, Instant)>,
}

impl Elector {
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    /// One attempt to hold the Lease (create, renew or take over); true when this replica holds
    /// it afterwards. Losing a race is `Ok(false)`.
    pub async fn try_hold(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(now, 0)),
            };
            return self.write(self.api.create(&PostParams::default(), &lease).await);
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let unchanged_for = self.unchanged_for(&rv);
        let spec = lease.spec.clone().unwrap_or_default();
        let next = match decide(&spec, &self.settings.identity, unchanged_for) {
            Move::Wait => {
                // Debug only: every retry period while another replica leads.
                tracing::debug!(
                    holder = %spec.holder_identity.as_deref().unwrap_or_default(),
                    "another replica holds the lease"
                );
                return Ok(false);
            }
            Move::Renew => LeaseSpec {
                renew_time: Some(now),
                lease_duration_seconds: Some(self.duration_seconds()),
                ..spec
            },
            Move::TakeOver => self.spec(now, spec.lease_transitions.unwrap_or(0).saturating_add(1)),
        };
        let updated = Lease {
            spec: Some(next),
            ..lease
        };
        let result = self
            .api
            .replace(&self.settings.name, &PostParams::default(), &updated)
            .await;
        self.write(result)
    }

    /// Gives the Lease up (on shutdown, or after stepping down) so another replica takes over
    /// at once. Bounded by the renew deadline: the API server may be what made it step down.
    pub async fn give_up(&mut self) {
        let within = self.settings.renew_deadline;
        let error = match tokio::time::timeout(within, self.clear_holder()).await {
            Ok(Ok(true)) => {
                tracing::info!(lease = %self.settings.name, "gave the lease up");
                return;
            }
            Ok(Ok(false)) => return,
            Ok(Err(e)) => LeaseError::Api(e),
            Err(_) => LeaseError::Timeout(within),
        };
        tracing::warn!(%error, "could not give the lease up; it expires by itself");
    }

    /// Clears the holder if it is this replica (false if it is not).
    async fn clear_holder(&self) -> Result<bool, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
            return Ok(false);
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        let given_up = Lease {
            spec: Some(spec),
            ..lease
        };
        self.api
            .replace(&self.settings.name, &PostParams::default(), &given_up)
            .await?;
        Ok(true)
    }

    /// This replica's Lease, acquired and renewed `now`.
    fn spec(&self, now: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(self.duration_seconds()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.settings.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    fn unchanged_for(&mut self, rv: &str) -> Duration {
        match &self.observed {
            Some((seen, since)) if seen == rv => since.elapsed(),
            _ => {
                self.observed = Some((rv.to_string(), Instant::now()));
                Duration::ZERO
            }
        }
    }

    /// Maps a create/replace result: conflicts mean another replica won.
    fn write(&mut self, result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
        match result {
            Ok(lease) => {
                let rv = lease.metadata.resource_version.unwrap_or_default();
                self.observed = Some((rv, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Runs `lead` while this replica holds the Lease, until `shutdown` is cancelled; then gives the
/// Lease up. `lead` receives a token cancelled when leadership ends; if it returns early, the
/// Lease is given up and the election starts over after a pause.
pub async fn run<F, Fut>(
    client: kube::Client,
    settings: LeaseSettings,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    mut lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let retry = settings.retry_period;
    let deadline = settings.renew_deadline;
    let mut elector = Elector::new(client, settings);
    // The last error logged: the same one is logged once until a success clears it.
    let mut logged: Option<String> = None;
    while !shutdown.is_cancelled() {
        let held = attempt(&mut elector, deadline).await;
        match &held {
            Ok(_) => logged = None,
            Err(e) => {
                let error = e.to_string();
                if logged.as_ref() != Some(&error) {
                    tracing::warn!(%error, "cannot read or write the lease; retrying");
                    logged = Some(error);
                }
            }
        }
        if !matches!(held, Ok(true)) {
            pause(&shutdown, retry).await;
            continue;
        }
        tracing::info!(identity = %elector.settings.identity, "acquired the lease: running the finalizer controller");
        metrics.set_leader(true);
        let term = shutdown.child_token();
        let mut work = tokio::spawn(lead(term.clone()));
        let mut renewed = Instant::now();
        let mut work_done = false;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = &mut work => {
                    work_done = true;
                    tracing::warn!("the finalizer controller stopped; giving the lease up");
                    break;
                }
                () = tokio::time::sleep(retry) => {}
            }
            let left = deadline.saturating_sub(renewed.elapsed());
            match attempt(&mut elector, left).await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => {
                    tracing::warn!("another replica holds the lease now; stepping down");
                    break;
                }
                Err(e) if renewed.elapsed() >= deadline => {
                    tracing::warn!(error = %e, "could not renew the lease in time; stepping down");
                    break;
                }
                Err(e) => tracing::warn!(error = %e, "renewing the lease failed; will retry"),
            }
        }
        term.cancel();
        if !work_done
            && tokio::time::timeout(Duration::from_secs(10), &mut work)
                .await
                .is_err()
        {
            tracing::warn!("the finalizer controller did not stop within 10 s; aborting it");
            work.abort();
        }
        metrics.set_leader(false);
        elector.give_up().await;
        if work_done {
            // A controller that stops by itself would otherwise be restarted in a tight loop.
            pause(&shutdown, retry).await;
        }
    }
}

/// Why an attempt to hold the Lease failed (losing a race is not a failure).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("{}", crate::access::live::chain(.0))]
    Api(#[from] kube::Error),
    #[error("no answer from the API server within {0:?}")]
    Timeout(Duration),
}

/// One [`Elector::try_hold`] bounded by `within`, so a hung connection cannot keep a leader
/// believing it leads past its renew deadline.
async fn attempt(elector: &mut Elector, within: Duration) -> Result<bool, LeaseError> {
    let within = within.max(Duration::from_millis(100));
    match tokio::time::timeout(within, elector.try_hold()).await {
        Ok(held) => Ok(held?),
        Err(_) => Err(LeaseError::Timeout(within)),
    }
}

/// Sleeps for `period` unless shutdown comes first.
async fn pause(shutdown: &CancellationToken, period: Duration) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(period) => {}
    }
}

#[cfg(test)]
mod tests;
