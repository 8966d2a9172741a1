use super::*;

#[tokio::test]
async fn readyz_follows_the_check_until_the_drain_begins() {
    use tower::ServiceExt;
    let cluster_ready = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cluster_ready);
    let readiness = Readiness::new(move || {
        if flag.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(NotReady::Unsynced(vec!["nodes"]))
        }
    });
    let app: Router = routes(readiness.clone());
    let get = |path: &'static str| {
        let app = app.clone();
        async move {
            let response = app
                .oneshot(
                    axum::http::Request::get(path)
                        .body(axum::body::Body::empty())
                        .expect("request"),
                )
                .await
                .expect("answered");
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), 1024)
                .await
                .expect("body");
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    assert_eq!(get("/healthz").await.0, StatusCode::OK);
    let (status, why) = get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(why.contains("nodes"), "{why}");
    cluster_ready.store(true, Ordering::Release);
    assert_eq!(get("/readyz").await.0, StatusCode::OK);
    let (signal, received) = tokio::sync::oneshot::channel::<()>();
    let drain = tokio::spawn(drain_after(
        async {
            let _ = received.await;
        },
        readiness.clone(),
        Duration::ZERO,
    ));
    assert_eq!(readiness.check(), Ok(()), "ready until the signal");
    signal.send(()).expect("drain waiting");
    drain.await.expect("drained");
    let (status, why) = get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(why.contains("shutting down"), "{why}");
    assert_eq!(
        get("/healthz").await.0,
        StatusCode::OK,
        "alive while draining"
    );
}
