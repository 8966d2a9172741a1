//! Connection limits: a client that never finishes its headers, connections that send nothing
//! (closed at their deadline, or sooner when a new connection needs the room), floods of them
//! beside real reviews and an established connection, an idle HTTP/2 connection.
//!
//! The tests: [`deadlines`] (each slow client closed at its deadline) and [`floods`] (real
//! requests answered beside floods of stalled connections); their parts: [`stall`] (one
//! connection that sends nothing), [`flood`] (many, on a thread of their own),
//! [`real_requests`] (the reviews and the established connection measured beside a flood).

mod deadlines;
mod flood;
mod floods;
mod real_requests;
mod stall;

use super::*;

/// Short connection deadlines, so the slow-client tests can wait them out.
fn stall_limits() -> ConnectionLimits {
    ConnectionLimits {
        first_request: Duration::from_secs(1),
        idle: Duration::from_secs(1),
        ..ConnectionLimits::default()
    }
}

async fn setup_limited(connection: ConnectionLimits) -> Setup {
    setup_deny(short_limits(connection)).await
}

/// The in-process server over [`cluster`] in deny mode with `limits`.
async fn setup_deny(limits: Limits) -> Setup {
    setup_with_limits(StaticView(Arc::new(cluster())), DeletionMode::Deny, limits).await
}

/// A TLS client configuration trusting `ca_pem` that offers `alpn`.
fn tls_connector(ca_pem: &[u8], alpn: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA accepted");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
