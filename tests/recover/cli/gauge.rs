//! The guard notices: `serve` exports `mosc_guard_nodes_stuck_on_lost_image{pool}` from its
//! caches, 1 for the pool of a node the bug left behind, 0 for the others, and back to 0 once
//! the node's target is cancelled (the alert resolves).

use std::time::Duration;

use serde_json::json;

use super::live::{RAN, key, merge, stuck_cluster};
use super::*;

const WORKER: &str = "mosc_guard_nodes_stuck_on_lost_image{pool=\"worker\"}";
const MASTER: &str = "mosc_guard_nodes_stuck_on_lost_image{pool=\"master\"}";

async fn wait_gauge(guard: &testkit::guard::Guard, series: &str, want: f64) {
    testkit::poll::wait_for(
        || async { Ok((guard.metric(series).await == Some(want)).then_some(())) },
        Duration::from_secs(30),
        &format!("{series} = {want}"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_counts_nodes_stuck_on_a_lost_image_per_pool() {
    let cp = stuck_cluster(&["worker-a"]).await;
    let guard = BIN.serve(&cp).start().await.expect("guard");
    wait_gauge(&guard, WORKER, 1.0).await;
    assert_eq!(guard.metric(MASTER).await, Some(0.0));
    // The cancel: desiredImage back to currentImage. Not stuck any more.
    merge(
        &cp,
        "worker-a",
        json!({"metadata": {"annotations": {key("desiredImage"): RAN}}}),
    )
    .await;
    wait_gauge(&guard, WORKER, 0.0).await;
}
