use super::*;

/// The reload timer sets the gauge at once and again when a renewed pair goes into
/// service.
#[tokio::test(start_paused = true)]
async fn the_expiry_gauge_follows_the_certificate_in_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |month: u8| {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        let not_after = rcgen::date_time_ymd(2030, month, 1);
        params.not_after = not_after;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        std::fs::write(dir.path().join("tls.crt"), cert.pem()).expect("write");
        std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).expect("write");
        not_after.unix_timestamp()
    };
    let first = write(1);
    let resolver = ReloadingResolver::load(CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    })
    .expect("load");
    let metrics = Arc::new(Metrics::default());
    let gauge = |m: &Metrics| {
        m.render(&[], &[], true)
            .lines()
            .find_map(|l| {
                l.strip_prefix("mosc_guard_serving_certificate_expiry_timestamp_seconds ")
                    .map(str::to_string)
            })
            .expect("gauge rendered")
    };
    let interval = Duration::from_secs(10);
    let reloader = resolver.spawn_reloader(interval, Arc::clone(&metrics));
    assert_eq!(
        gauge(&metrics),
        first.to_string(),
        "set before the first tick"
    );
    // The first tick, at once, finds the same pair.
    tokio::task::yield_now().await;
    let second = write(2);
    assert_eq!(gauge(&metrics), first.to_string());
    tokio::time::sleep(interval + Duration::from_millis(1)).await;
    assert_eq!(
        gauge(&metrics),
        second.to_string(),
        "renewed on the next tick"
    );
    reloader.abort();
    assert_eq!(not_after(b"not a certificate"), None);
}
