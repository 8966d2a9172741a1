//! Small HTTPS servers on 127.0.0.1 for the registry tests, each stopped on Drop:
//!
//! - [`TokenServer`]: the kit's own implementation of Docker's registry token protocol
//!   (distribution's `docs/spec/auth/token.md`): `GET /token?service=..&scope=repository:NAME:ACTIONS`
//!   with Basic credentials answers `{"token", "expires_in"}`, an ES256 JWT whose `x5c` header
//!   carries its self-signed signing certificate (the file distribution's `auth.token.rootcertbundle`
//!   names). Wrong credentials get 401, as a real token service refuses them. Each user may have
//!   some actions only: the token grants the actions asked for that the user has (`*` asked is
//!   everything the user has), as a real token service grants the intersection.
//! - [`Stub`]: answers every request with one fixed status, headers and body: a failing
//!   registry (5xx), a host that is not a registry (404 pages).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::Result;
use crate::pki::CertPair;

type Handler = Arc<dyn Fn(Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

/// A running HTTPS server; aborted on Drop.
struct Server {
    addr: String,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(serving: &CertPair, handler: Handler) -> Result<Server> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&serving.cert)?.collect::<std::result::Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&serving.key)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let handler = Arc::clone(&handler);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req| {
                    let handler = Arc::clone(&handler);
                    async move { Ok::<_, Infallible>(handler(req)) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(Server { addr, task })
}

fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

/// An HTTPS server answering every request alike.
pub struct Stub {
    server: Server,
}

impl Stub {
    /// Answers every path with `status`, `headers` and `body`.
    pub async fn start(
        serving: &CertPair,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Self> {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let body = body.to_string();
        let handler: Handler = Arc::new(move |_req| {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            response(status, &h, &body)
        });
        Ok(Stub {
            server: serve(serving, handler).await?,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> &str {
        &self.server.addr
    }
}

/// The kit's token service.
pub struct TokenServer {
    server: Server,
    /// The signing certificate (PEM) distribution's `rootcertbundle` trusts.
    cert_pem: String,
}

/// The issuer and service names the registry's `auth.token` section names.
pub const ISSUER: &str = "mosc-guard-test-token-issuer";
pub const SERVICE: &str = "mosc-guard-test-registry";

struct Signer {
    key: EcdsaKeyPair,
    x5c: String,
    rng: SystemRandom,
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn b64std(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn b64_decode(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
}

/// The actions of `asked` that a user allowed `allowed` gets (`*` on either side: all of the
/// other's).
fn granted<'a>(asked: &'a str, allowed: &'a [String]) -> Vec<&'a str> {
    let asked: Vec<&str> = asked.split(',').filter(|a| !a.is_empty()).collect();
    if allowed.iter().any(|a| a == "*") {
        return asked;
    }
    if asked.contains(&"*") {
        return allowed.iter().map(String::as_str).collect();
    }
    asked
        .into_iter()
        .filter(|a| allowed.iter().any(|b| b == a))
        .collect()
}

impl Signer {
    fn token(&self, subject: &str, scope: &str, allowed: &[String]) -> Option<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
        let access: Vec<serde_json::Value> = scope
            .split(' ')
            .filter_map(|s| {
                let mut parts = s.splitn(3, ':');
                let (kind, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
                Some(serde_json::json!({"type": kind, "name": name,
                    "actions": granted(actions, allowed)}))
            })
            .collect();
        let header = serde_json::json!({"alg": "ES256", "typ": "JWT", "x5c": [self.x5c]});
        let claims = serde_json::json!({
            "iss": ISSUER, "sub": subject, "aud": SERVICE,
            "exp": now + 300, "nbf": now - 10, "iat": now,
            "jti": format!("{now}-{}", subject.len()), "access": access,
        });
        let signing_input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let sig = self.key.sign(&self.rng, signing_input.as_bytes()).ok()?;
        Some(format!("{signing_input}.{}", b64url(sig.as_ref())))
    }
}

/// A user of the token service: name, password, and the actions it may be granted (`*`: all).
pub type TokenUser<'a> = (&'a str, &'a str, &'a [&'a str]);

impl TokenServer {
    /// Serves tokens for every action to `user`:`password` on `serving`'s certificate; anyone
    /// else gets 401.
    pub async fn start(serving: &CertPair, user: &str, password: &str) -> Result<Self> {
        Self::start_for(serving, &[(user, password, &["*"])]).await
    }

    /// Serves tokens to each of `users`, granting only the actions each may have; anyone else
    /// gets 401.
    pub async fn start_for(serving: &CertPair, users: &[TokenUser<'_>]) -> Result<Self> {
        let params = rcgen::CertificateParams::new(vec!["mosc-guard-token-signer".to_string()])?;
        let key_pair = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key_pair)?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &key_pair.serialize_der(),
            &rng,
        )
        .map_err(|e| format!("token signing key: {e}"))?;
        let signer = Arc::new(Signer {
            key,
            x5c: b64std(cert.der()),
            rng,
        });
        let users: Vec<(String, Vec<String>)> = users
            .iter()
            .map(|(user, password, actions)| {
                (
                    format!("{user}:{password}"),
                    actions.iter().map(|a| a.to_string()).collect(),
                )
            })
            .collect();
        let handler: Handler = Arc::new(move |req: Request<Incoming>| {
            let given = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Basic "))
                .and_then(b64_decode)
                .and_then(|b| String::from_utf8(b).ok());
            let Some((given, allowed)) =
                given.and_then(|g| users.iter().find(|(u, _)| *u == g).cloned())
            else {
                return response(401, &[], r#"{"details":"invalid credentials"}"#);
            };
            let user = given.split(':').next().unwrap_or_default().to_string();
            let scope = req
                .uri()
                .query()
                .unwrap_or_default()
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .filter(|(k, _)| *k == "scope")
                .map(|(_, v)| {
                    v.replace("%3A", ":")
                        .replace("%2C", ",")
                        .replace("%2F", "/")
                        .replace('+', " ")
                })
                .collect::<Vec<_>>()
                .join(" ");
            match signer.token(&user, &scope, &allowed) {
                Some(t) => response(
                    200,
                    &[("Content-Type", "application/json")],
                    &serde_json::json!({"token": t, "expires_in": 300}).to_string(),
                ),
                None => response(500, &[], "signing failed"),
            }
        });
        Ok(TokenServer {
            server: serve(serving, handler).await?,
            cert_pem: cert.pem(),
        })
    }

    /// `https://127.0.0.1:PORT/token`.
    pub fn realm(&self) -> String {
        format!("https://{}/token", self.server.addr)
    }

    /// The signing certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }
}
