//! Leader election (`mosc_guard::defer::leader`) on a real API server, at about a third of the
//! guard's timing: the two points for which it is hand-written rather than taken from
//! `kube-lease-manager` (the module doc says why). A takeover follows the candidate's own clock,
//! whatever the holder writes as its renewTime; a holder cut off from the API server stops
//! its work before another replica starts.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

use mosc_guard::defer::leader::{self, Elector, LeaseSettings};
use mosc_guard::telemetry::metrics::Metrics;
use testkit::controlplane::ControlPlane;

const DURATION: Duration = Duration::from_secs(3);

fn settings(lease: &str, identity: &str) -> LeaseSettings {
    LeaseSettings {
        duration: DURATION,
        retry_period: Duration::from_millis(500),
        renew_deadline: Duration::from_secs(2),
        ..LeaseSettings::new("default".into(), lease.into(), identity.into())
    }
}

/// Renews `lease` as `holder` every 500 ms, writing renewTime by a clock `skew` off.
async fn renew_with_skewed_clock(leases: Api<Lease>, lease: String, skew: SignedDuration) {
    loop {
        let now = MicroTime(Timestamp::now() + skew);
        if let Ok(mut current) = leases.get(&lease).await {
            let spec = current.spec.get_or_insert_with(LeaseSpec::default);
            spec.renew_time = Some(now);
            // A conflict only means another writer came first; the next round renews.
            let _ = leases
                .replace(&lease, &PostParams::default(), &current)
                .await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_follows_the_candidates_clock_not_the_holders() {
    let cp = ControlPlane::start().await.expect("control plane");
    let leases: Api<Lease> = Api::namespaced(cp.client(), "default");
    // A holder whose clock is an hour behind looks long expired by renewTime, and one an hour
    // ahead looks alive for an hour after it died.
    for (lease, skew) in [
        ("behind", SignedDuration::from_hours(-1)),
        ("ahead", SignedDuration::from_hours(1)),
    ] {
        let now = MicroTime(Timestamp::now() + skew);
        let held = Lease {
            metadata: ObjectMeta {
                name: Some(lease.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("replica-a".into()),
                lease_duration_seconds: Some(3),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        leases
            .create(&PostParams::default(), &held)
            .await
            .expect("create the Lease");
        let holder = tokio::spawn(renew_with_skewed_clock(leases.clone(), lease.into(), skew));

        // While the holder renews, the candidate never takes over (two lease durations).
        let mut candidate = Elector::new(cp.client(), settings(lease, "replica-b"));
        let until = Instant::now() + 2 * DURATION;
        while Instant::now() < until {
            let took = candidate.try_hold().await.expect("read the Lease");
            assert!(!took, "{lease}: took a live Lease over");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }

        // The holder dies: the candidate takes over one lease duration after the Lease last
        // changed, by its own clock.
        holder.abort();
        let died = Instant::now();
        while !candidate.try_hold().await.expect("read the Lease") {
            assert!(
                died.elapsed() < 3 * DURATION,
                "{lease}: a dead holder was not replaced"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let took = died.elapsed();
        eprintln!("{lease}: taken over {took:.1?} after the holder stopped renewing");
        // The last renewal may have landed up to a round (500 ms) before the abort.
        assert!(
            took >= DURATION - Duration::from_millis(750),
            "{lease}: taken over early ({took:.1?})"
        );
        let spec = leases.get(lease).await.expect("lease").spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
        assert_eq!(spec.lease_transitions, Some(1));
    }
}

/// When each replica's work started and stopped.
type Terms = Arc<Mutex<Vec<(&'static str, bool, Instant)>>>;

/// Runs the election for `identity` until `shutdown`, recording its terms in `terms`.
fn elect(
    client: kube::Client,
    identity: &'static str,
    terms: &Terms,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let terms = Arc::clone(terms);
    tokio::spawn(leader::run(
        client,
        settings("cut-off", identity),
        Arc::new(Metrics::default()),
        shutdown.clone(),
        move |term| {
            let terms = Arc::clone(&terms);
            async move {
                let record = |leads| {
                    let mut t = terms.lock().unwrap_or_else(|p| p.into_inner());
                    t.push((identity, leads, Instant::now()));
                };
                record(true);
                term.cancelled().await;
                record(false);
            }
        },
    ))
}

fn terms_of(terms: &Terms) -> Vec<(&'static str, bool, Instant)> {
    terms.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_the_api_server_steps_down_before_another_takes_over() {
    let cp = ControlPlane::start().await.expect("control plane");
    let forwarder = testkit::forwarder::Forwarder::to_apiserver(&cp)
        .await
        .expect("forwarder");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = testkit::users::admin_kubeconfig_via(&cp, dir.path(), &forwarder.https_url())
        .expect("kubeconfig");
    let cut_off = testkit::controlplane::client_from_kubeconfig(&kubeconfig)
        .await
        .expect("client");
    let terms = Terms::default();
    let shutdown = CancellationToken::new();

    let a = elect(cut_off, "replica-a", &terms, &shutdown);
    testkit::scenario::wait_for(
        || async { Ok((!terms_of(&terms).is_empty()).then_some(())) },
        Duration::from_secs(10),
        "replica-a to lead",
    )
    .await
    .expect("replica-a leads");
    let b = elect(cp.client(), "replica-b", &terms, &shutdown);
    tokio::time::sleep(2 * DURATION).await;
    assert_eq!(
        terms_of(&terms).len(),
        1,
        "replica-b waits while replica-a renews"
    );

    // Packets to the API server dropped: replica-a cannot renew.
    forwarder.set_black_hole(true);
    let cut = Instant::now();
    testkit::scenario::wait_for(
        || async {
            Ok(terms_of(&terms)
                .iter()
                .any(|t| t.0 == "replica-b")
                .then_some(()))
        },
        Duration::from_secs(30),
        "replica-b to take over",
    )
    .await
    .expect("replica-b takes over");
    let terms = terms_of(&terms);
    let at = |who, leads| {
        terms
            .iter()
            .find(|t| t.0 == who && t.1 == leads)
            .map(|t| t.2)
            .unwrap_or_else(|| panic!("{who} leads={leads} in {terms:?}"))
    };
    let (stepped_down, took_over) = (at("replica-a", false), at("replica-b", true));
    eprintln!(
        "replica-a stepped down {:.1?} after the cut, replica-b took over {:.1?} after it",
        stepped_down - cut,
        took_over - cut
    );
    assert!(
        stepped_down < took_over,
        "replica-a stopped its work {:.1?} after replica-b started",
        stepped_down - took_over
    );
    shutdown.cancel();
    a.abort();
    b.abort();
}
