//! When the serving certificate in service expires, as the gauge
//! `mosc_guard_serving_certificate_expiry_timestamp_seconds`, so an alert can say so days ahead
//! (docs/metrics.md, "Alerts"). service-ca and cert-manager renew the Secret long before
//! expiry and the guard reloads it (`tls`); the gauge shows whether that actually happened,
//! since it reads the certificate handshakes get, not the file.

use std::sync::Arc;
use std::time::Duration;

use crate::telemetry::metrics::Metrics;
use crate::webhook::tls::ReloadingResolver;

/// The notAfter of a DER certificate, in seconds since the Unix epoch; `None` if it does not
/// parse (rustls accepted it, so that would be a certificate rustls reads and x509-parser not).
pub fn not_after(der: &[u8]) -> Option<i64> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .map(|(_, cert)| cert.validity().not_after.timestamp())
}

/// Sets the gauge from the certificate `resolver` serves now; 0 when it cannot be read, which
/// the alert reports as expiring.
pub fn update(resolver: &ReloadingResolver, metrics: &Metrics) {
    let expiry = resolver
        .serving_certificate()
        .and_then(|der| not_after(der.as_ref()));
    if expiry.is_none() {
        tracing::warn!("cannot read the serving certificate's expiry; reporting 0");
    }
    metrics.set_certificate_expiry(expiry.unwrap_or(0));
}

/// Sets the gauge now and again every `interval` (the reload interval), until dropped.
pub fn spawn_gauge(
    resolver: Arc<ReloadingResolver>,
    metrics: Arc<Metrics>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    update(&resolver, &metrics);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            update(&resolver, &metrics);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::tls::CertFiles;

    #[test]
    fn the_gauge_follows_the_certificate_in_service() {
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
        let metrics = Metrics::default();
        update(&resolver, &metrics);
        let gauge = |m: &Metrics| {
            m.render(&[], &[], true)
                .lines()
                .find_map(|l| {
                    l.strip_prefix("mosc_guard_serving_certificate_expiry_timestamp_seconds ")
                        .map(str::to_string)
                })
                .expect("gauge rendered")
        };
        assert_eq!(gauge(&metrics), first.to_string());
        let second = write(2);
        assert!(resolver.reload().expect("reload"));
        update(&resolver, &metrics);
        assert_eq!(gauge(&metrics), second.to_string());
        assert_eq!(not_after(b"not a certificate"), None);
    }
}
