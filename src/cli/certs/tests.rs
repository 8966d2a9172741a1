//! The development CA and serving certificate: what they hold, and how files are written.

use std::sync::Arc;

use rcgen::Issuer;
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::*;

fn subject() -> Subject {
    Subject::new(
        "mosc-guard",
        "mosc-guard",
        &["127.0.0.1".into(), "::1".into()],
    )
    .expect("valid subject")
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("one PEM certificate")
}

/// Verifies `pem` (with `intermediates`) for `name` at `at`, trusting only `ca_pem`:
/// the same checks (chain, name, serverAuth, validity) a TLS client makes.
fn verify(
    ca_pem: &str,
    pem: &str,
    intermediates: &[CertificateDer<'static>],
    name: &str,
    at: SystemTime,
) -> Result<(), rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(der(ca_pem)).expect("CA accepted as trust anchor");
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .expect("verifier");
    let name = ServerName::try_from(name.to_owned()).expect("server name");
    verifier
        .verify_server_cert(
            &der(pem),
            intermediates,
            &name,
            &[],
            UnixTime::since_unix_epoch(
                at.duration_since(SystemTime::UNIX_EPOCH)
                    .expect("after 1970"),
            ),
        )
        .map(|_| ())
}

#[test]
fn ca_verifies_the_leaf_for_every_san() {
    let now = SystemTime::now();
    let b = generate(&subject(), now, 365).expect("generate");
    for name in [
        "mosc-guard",
        "mosc-guard.mosc-guard",
        "mosc-guard.mosc-guard.svc",
        "mosc-guard.mosc-guard.svc.cluster.local",
        "127.0.0.1",
        "::1",
    ] {
        verify(&b.ca_pem, &b.cert_pem, &[], name, now).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for name in ["other.mosc-guard.svc", "mosc-guard.default.svc", "10.0.0.1"] {
        assert!(
            verify(&b.ca_pem, &b.cert_pem, &[], name, now).is_err(),
            "{name} must not be valid"
        );
    }
}

#[test]
fn leaf_is_not_trusted_by_another_ca() {
    let now = SystemTime::now();
    let (a, b) = (
        generate(&subject(), now, 1).expect("a"),
        generate(&subject(), now, 1).expect("b"),
    );
    let err = verify(
        &b.ca_pem,
        &a.cert_pem,
        &[],
        "mosc-guard.mosc-guard.svc",
        now,
    )
    .expect_err("a's leaf under b's CA");
    // Same subject name, so the client finds the other CA and rejects its signature.
    assert!(
        matches!(
            err,
            rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadSignature | rustls::CertificateError::UnknownIssuer
            )
        ),
        "{err:?}"
    );
}

#[test]
fn leaf_cannot_act_as_a_ca() {
    let now = SystemTime::now();
    let b = generate(&subject(), now, 30).expect("generate");
    // Sign a certificate with the serving key, naming the leaf as issuer.
    let mut leaf_as_issuer = CertificateParams::default();
    leaf_as_issuer.distinguished_name = common_name("mosc-guard.mosc-guard.svc");
    let issuer = Issuer::new(
        leaf_as_issuer,
        KeyPair::from_pem(&b.key_pem).expect("key parses"),
    );
    let mut params = CertificateParams::new(vec!["evil.example".to_owned()]).expect("params");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let evil = params
        .signed_by(&KeyPair::generate().expect("key"), &issuer)
        .expect("sign");
    let err = verify(
        &b.ca_pem,
        &evil.pem(),
        &[der(&b.cert_pem)],
        "evil.example",
        now,
    )
    .expect_err("a certificate signed by the leaf");
    assert!(format!("{err:?}").contains("EndEntityUsedAsCa"), "{err:?}");
}

#[test]
fn validity_is_days_from_now_with_backdating() {
    let now = SystemTime::now();
    let b = generate(&subject(), now, 10).expect("generate");
    let day = Duration::from_secs(86_400);
    let name = "mosc-guard.mosc-guard.svc";
    let at = |t: SystemTime| verify(&b.ca_pem, &b.cert_pem, &[], name, t);
    assert!(at(now - Duration::from_secs(30 * 60)).is_ok());
    assert!(at(now + 10 * day - Duration::from_secs(60)).is_ok());
    assert!(at(now - 2 * BACKDATE).is_err());
    assert!(at(now + 10 * day + Duration::from_secs(60)).is_err());
}

#[test]
fn key_is_pkcs8_pem_and_ca_key_is_absent() {
    let b = generate(&subject(), SystemTime::now(), 1).expect("generate");
    assert!(
        b.key_pem
            .starts_with(concat!("-----BEGIN ", "PRIVATE KEY-----\n"))
    );
    for pem in [&b.ca_pem, &b.cert_pem] {
        assert!(!pem.contains("PRIVATE KEY"));
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 1);
    }
}

#[test]
fn days_out_of_range_are_refused() {
    for days in [0, MAX_DAYS + 1, u32::MAX] {
        assert!(matches!(
            generate(&subject(), SystemTime::now(), days),
            Err(CertsError::InvalidDays(d)) if d == days
        ));
    }
}

#[test]
fn names_must_be_dns1123_labels() {
    let long = "a".repeat(64);
    for good in ["a", "mosc-guard", "0abc", "a-1", &"a".repeat(63)] {
        assert!(is_dns1123_label(good), "{good}");
    }
    for bad in ["", "-a", "a-", "A", "a_b", "a.b", "ü", long.as_str()] {
        assert!(!is_dns1123_label(bad), "{bad}");
        assert!(matches!(
            Subject::new(bad, "ns", &[]),
            Err(CertsError::InvalidName {
                flag: "--service",
                ..
            })
        ));
        assert!(matches!(
            Subject::new("svc", bad, &[]),
            Err(CertsError::InvalidName {
                flag: "--namespace",
                ..
            })
        ));
    }
}

#[test]
fn ips_must_parse_and_are_deduplicated() {
    for bad in ["300.1.1.1", "localhost", "", "1.2.3.4/32"] {
        assert!(matches!(
            Subject::new("svc", "ns", &[bad.to_owned()]),
            Err(CertsError::InvalidIp(v)) if v == bad
        ));
    }
    let s = Subject::new("svc", "ns", &["::1".into(), "0:0::1".into()]).expect("valid");
    assert_eq!(s.ips, vec![IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])]);
}

#[test]
fn ca_bundle_is_standard_base64_of_the_pem() {
    // RFC 4648, section 10.
    for (input, want) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(ca_bundle(input), want, "{input:?}");
    }
    // And exactly what the API's own type for caBundle serializes to.
    let pem = generate(&subject(), SystemTime::now(), 1)
        .expect("generate")
        .ca_pem;
    let api = serde_json::to_value(k8s_openapi::ByteString(pem.clone().into_bytes()))
        .expect("serializes");
    assert_eq!(api, serde_json::Value::String(ca_bundle(&pem)));
}
