//! Dry-run deletions through kube-apiserver at each rate, up to the first rate with an error or not sustained.

use super::*;

// ---------------------------------------------------------------------------------------------
// Through the API server.

/// Rates (requests/s) to try, from `MOSC_GUARD_LOAD_API_RATES` (comma-separated).
fn api_rates() -> Vec<u64> {
    match std::env::var("MOSC_GUARD_LOAD_API_RATES") {
        Ok(v) => v
            .split(',')
            .map(|r| {
                r.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("MOSC_GUARD_LOAD_API_RATES={v:?}: {e}"))
            })
            .collect(),
        Err(_) => vec![20],
    }
}

/// One dry-run deletion through the API server: MOSC worker must be refused by the webhook,
/// MOSC infra allowed.
async fn delete_through_api(client: &kube::Client, kind: Kind) -> Result<(), String> {
    let name = if kind == Kind::Allow {
        "infra"
    } else {
        "worker"
    };
    let params = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    match (kind, mco::moscs(client).delete(name, &params).await) {
        (Kind::Allow, Ok(_)) => Ok(()),
        (Kind::Deny, Err(kube::Error::Api(s)))
            if s.code == 403 && s.message.contains("cannot be deleted yet") =>
        {
            Ok(())
        }
        (kind, other) => Err(format!("{kind:?}: {:?}", other.map(|_| "deleted"))),
    }
}

/// Dry-run deletions through kube-apiserver, which calls the guard as its validating webhook,
/// at each rate of `MOSC_GUARD_LOAD_API_RATES` for `MOSC_GUARD_LOAD_API_SECONDS` (one in ten an
/// allow that needs the confirming read). The ladder stops at the first rate with an error or
/// that the machine does not sustain (sent below 95% of it); the first rate must be clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_through_the_api_server_answer_every_request() {
    let rates = api_rates();
    let seconds = env_or("MOSC_GUARD_LOAD_API_SECONDS", 3).max(1);
    let node_count = env_or("MOSC_GUARD_LOAD_NODES", 40) as usize;
    let cp = ControlPlane::start().await.expect("control plane");
    seed(&cp, node_count).await;
    let guard = BIN.serve(&cp).start().await.expect("guard");
    testkit::webhooks::register_validating_webhook(&cp, &guard)
        .await
        .expect("register webhook");
    let client = cp.client();
    for kind in [Kind::Deny, Kind::Allow] {
        delete_through_api(&client, kind)
            .await
            .expect("warm-up deletion");
    }

    let mut first_errors: Option<Vec<String>> = None;
    let mut best = None;
    for rate in rates {
        let total = rate * seconds;
        let started = Instant::now();
        let mut tick = open_loop(rate);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..total {
            tick.tick().await;
            let kind = if i % 10 == 5 { Kind::Allow } else { Kind::Deny };
            let client = client.clone();
            tasks.spawn(async move {
                let t = Instant::now();
                let r = delete_through_api(&client, kind).await;
                (kind, t.elapsed(), r)
            });
        }
        let sent_in = started.elapsed();
        let mut latencies: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
        let mut errors = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (kind, took, r) = joined.expect("request task");
            latencies.entry(kind).or_default().push(took);
            if let Err(e) = r {
                errors.push(e);
            }
        }
        let achieved = total as f64 / sent_in.as_secs_f64();
        println!(
            "through the API server: {rate}/s for {seconds} s: {total} dry-run deletions, sent at \
             {achieved:.1}/s, all answered after {:.1} s; {} errors",
            started.elapsed().as_secs_f64(),
            errors.len()
        );
        print_latencies(latencies);
        let clean = errors.is_empty();
        let sustained = achieved >= 0.95 * rate as f64;
        if first_errors.is_none() {
            first_errors = Some(errors.clone());
        }
        if !clean {
            print!("  failed requests by kind:\n{}", summarize(&errors));
        }
        if !(clean && sustained) {
            break;
        }
        best = Some(rate);
    }
    println!("through the API server: highest rate sustained with 0 errors: {best:?} requests/s");
    let first_errors = first_errors.unwrap_or_default();
    assert!(
        first_errors.is_empty(),
        "failed requests at the first rate:\n{}\n{}",
        summarize(&first_errors),
        guard.log_tail(40)
    );
}
