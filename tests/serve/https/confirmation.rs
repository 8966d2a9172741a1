//! The confirming fresh read: a stale cache's allow overturned, an allow that cannot be verified
//! refused saying why, the override still applying, and a burst sharing one read.

use super::*;

/// A cache that lags behind the cluster (empty), and a fresh read that returns the real
/// cluster, fails, or never answers.
async fn lagging(fresh: FreshRead) -> Setup {
    setup_with(ScriptedView::empty().fresh(fresh)).await
}

#[tokio::test]
async fn a_stale_cache_allow_is_overturned_by_the_fresh_read() {
    let s = lagging(FreshRead::Listed(cluster())).await;
    let out = post(
        &s,
        &review("DELETE", "machineosconfigs", mosc("worker", None), false),
    )
    .await;
    assert_eq!(out["response"]["allowed"], false);
    let msg = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(msg.contains(NODE), "{msg}");
    let metrics = s
        .http
        .get(format!("{}/metrics", s.server.url))
        .send()
        .await
        .expect("metrics");
    let text = metrics.text().await.expect("body");
    assert!(
        text.contains("mosc_guard_confirmations_total{result=\"overturned\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn an_allow_that_cannot_be_verified_is_denied_saying_why() {
    for (fresh, why) in [
        (FreshRead::fails("connection refused"), "connection refused"),
        (FreshRead::Hangs, "took longer than 0.5s"),
    ] {
        let s = lagging(fresh).await;
        let out = post(
            &s,
            &review("DELETE", "machineosconfigs", mosc("infra", None), false),
        )
        .await;
        assert_eq!(out["response"]["allowed"], false, "{why}");
        assert_eq!(out["response"]["status"]["code"], 403, "{why}");
        let msg = out["response"]["status"]["message"]
            .as_str()
            .expect("message");
        assert!(msg.contains("could not verify"), "{msg}");
        assert!(msg.contains(why), "{msg}");
        assert!(msg.contains("fails closed"), "{msg}");
    }
}

#[tokio::test]
async fn the_override_still_applies_when_the_guard_cannot_verify() {
    let s = lagging(FreshRead::fails("connection refused")).await;
    let old = mosc("infra", Some("API server maintenance, pool idle"));
    let out = post(&s, &review("DELETE", "machineosconfigs", old, false)).await;
    assert_eq!(out["response"]["allowed"], true);
    let warning = out["response"]["warnings"][0].as_str().expect("warning");
    assert!(
        warning.contains("without verification: reading nodes, builds, pools and MachineOSConfigs"),
        "{warning}"
    );
    assert!(
        warning.contains("API server maintenance, pool idle"),
        "{warning}"
    );
}

/// A burst of allowable reviews (forged, or garbage collection deleting builds) shares the
/// confirming reads instead of costing one node list each; each is still confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_allowable_reviews_shares_the_confirming_read() {
    const BURST: usize = 20;
    // A cache that would allow everything, and a slow fresh read that counts how often it runs.
    let view = ScriptedView::empty().fresh_delay(Duration::from_millis(100));
    let reads = view.reads();
    let s = setup_with(view).await;
    let body = review("DELETE", "machineosconfigs", mosc("infra", None), false);
    let answers = futures::future::join_all((0..BURST).map(|_| post(&s, &body))).await;
    for out in &answers {
        assert_eq!(out["response"]["allowed"], true, "{out}");
    }
    let reads = reads.load(std::sync::atomic::Ordering::SeqCst);
    // One read for the first arrivals, one for everyone who came while it ran; stragglers
    // scheduled late on a loaded machine may need a few more. Without coalescing it is one per
    // review.
    assert!(
        (1..=BURST / 4).contains(&reads),
        "{BURST} concurrent reviews cost {reads} fresh reads"
    );
}
