//! `mosc-guard certs` end to end: the real binary writing into a temporary directory, and a
//! TLS handshake proving the files work as the API server would use them.
//!
//! Contract: exit 0 and stdout starting `caBundle: <base64 of ca.crt>`; tls.key mode 0600;
//! no CA key written; existing files kept unless `--force`; bad input is one line on stderr
//! with exit 2 and nothing written.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use mosc_guard::server::tls::{CertFiles, ReloadingResolver};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use testkit::cli::CliRun;
use testkit::guard::GuardBin;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

fn certs(args: &[&str]) -> CliRun {
    BIN.cli().arg("certs").args(args).run()
}

fn certs_into(dir: &Path, extra: &[&str]) -> CliRun {
    let dir = dir.to_str().expect("UTF-8 temp path");
    let mut args = vec!["--out", dir];
    args.extend_from_slice(extra);
    certs(&args)
}

/// Exit 2 with exactly one line on stderr, containing `needle`; nothing on stdout.
fn assert_error(run: &CliRun, needle: &str) {
    assert_eq!(run.code, Some(2), "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {:?}", run.stderr);
    assert!(lines[0].starts_with("error: "), "{:?}", lines[0]);
    assert!(lines[0].contains(needle), "{:?} lacks {needle:?}", lines[0]);
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// tls.key in `dir` is readable by its owner only (0600).
fn assert_key_private(dir: &Path) {
    let mode = fs::metadata(dir.join("tls.key"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "tls.key mode {mode:o}");
}

#[test]
fn writes_the_pair_and_prints_the_ca_bundle_first() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("new/nested");
    let run = certs_into(&dir, &["--ip", "127.0.0.1", "--days", "30"]);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.stderr, "");

    assert_eq!(
        names_in(&dir),
        ["ca.crt", "tls.crt", "tls.key"],
        "no CA key"
    );
    let ca = fs::read(dir.join("ca.crt")).expect("ca.crt");
    // Exactly what the API's own type for caBundle would serialize ca.crt to.
    let want = serde_json::to_value(k8s_openapi::ByteString(ca)).expect("base64");
    let mut lines = run.stdout.lines();
    assert_eq!(
        lines.next().and_then(|l| l.strip_prefix("caBundle: ")),
        want.as_str(),
        "{}",
        run.stdout
    );
    let rest: String = lines.collect::<Vec<_>>().join("\n");
    let d = dir.display();
    for needle in [
        format!("{d}/tls.crt"),
        format!(
            "kubectl -n mosc-guard create secret tls mosc-guard-tls --cert={d}/tls.crt --key={d}/tls.key"
        ),
        "caBundle".to_owned(),
    ] {
        assert!(rest.contains(&needle), "{needle:?} missing from:\n{rest}");
    }

    let key = fs::read_to_string(dir.join("tls.key")).expect("tls.key");
    assert!(key.starts_with(concat!("-----BEGIN ", "PRIVATE KEY-----")));
    assert_key_private(&dir);
}

#[test]
fn keeps_existing_files_unless_forced() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    assert_eq!(certs_into(dir, &[]).code, Some(0));
    let before = fs::read(dir.join("ca.crt")).expect("ca.crt");

    let again = certs_into(dir, &[]);
    assert_error(&again, "--force");
    assert!(again.stderr.contains("ca.crt"), "{}", again.stderr);
    assert_eq!(fs::read(dir.join("ca.crt")).expect("ca.crt"), before);

    // One leftover file is enough to refuse, and nothing else gets written.
    fs::remove_file(dir.join("ca.crt")).expect("rm");
    fs::remove_file(dir.join("tls.crt")).expect("rm");
    assert_error(&certs_into(dir, &[]), "tls.key");
    assert_eq!(names_in(dir), ["tls.key"]);

    // --force replaces all three; tls.key is 0600 again even if it was not.
    fs::set_permissions(dir.join("tls.key"), fs::Permissions::from_mode(0o644)).expect("chmod");
    let forced = certs_into(dir, &["--force"]);
    assert_eq!(forced.code, Some(0), "stderr: {}", forced.stderr);
    assert_eq!(names_in(dir), ["ca.crt", "tls.crt", "tls.key"]);
    assert_ne!(
        fs::read(dir.join("ca.crt")).expect("ca.crt"),
        before,
        "a new CA"
    );
    assert_key_private(dir);
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("out");
    for (args, needle) in [
        (
            &["--namespace", "Mosc_Guard"][..],
            "--namespace \"Mosc_Guard\"",
        ),
        (&["--service=svc-"][..], "--service \"svc-\""),
        (&["--ip", "300.1.1.1"][..], "--ip \"300.1.1.1\""),
        (&["--ip", "localhost"][..], "--ip"),
        (&["--days", "0"][..], "--days"),
    ] {
        assert_error(&certs_into(&dir, args), needle);
        assert!(!dir.exists(), "{args:?} created {}", dir.display());
    }

    // A path below a regular file cannot become a directory.
    let file = tmp.path().join("file");
    fs::write(&file, "").expect("write");
    assert_error(&certs_into(&file.join("sub"), &[]), "creating directory");
}

/// Serves tls.crt/tls.key through the crate's own loader on 127.0.0.1 and connects with a
/// client that trusts only ca.crt, as the API server does with `caBundle`.
#[tokio::test]
async fn api_server_style_client_accepts_the_generated_pair() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let run = certs_into(dir, &["--ip", "127.0.0.1"]);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);

    let resolver = ReloadingResolver::load(CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    })
    .expect("the serve command's loader accepts the files");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(
        resolver.server_config(None).expect("server config"),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(tcp).await;
            });
        }
    });

    let mut roots = rustls::RootCertStore::empty();
    let ca = fs::read(dir.join("ca.crt")).expect("ca.crt");
    roots
        .add(CertificateDer::from_pem_slice(&ca).expect("CA PEM"))
        .expect("CA accepted");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    ));
    let handshake = |name: &'static str| {
        let connector = connector.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let name = ServerName::try_from(name).expect("server name");
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                connector.connect(name, tcp),
            )
            .await
            .expect("handshake finishes")
        }
    };

    for name in ["mosc-guard.mosc-guard.svc", "127.0.0.1"] {
        if let Err(e) = handshake(name).await {
            panic!("handshake as {name}: {e}");
        }
    }
    for name in ["other.mosc-guard.svc", "mosc-guard.default.svc"] {
        let err = handshake(name).await.expect_err(name);
        let tls = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        assert!(
            matches!(
                tls,
                Some(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. }
                ))
            ),
            "{name}: {err:?}"
        );
    }

    server.abort();
    let _ = server.await;
}
