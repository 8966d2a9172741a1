//! The HTTPS listener: the TLS accept loop, per-connection deadlines and caps, and a graceful
//! shutdown that lets requests in flight finish.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

#[derive(Debug)]
pub struct Limits {
    /// Whole-request deadline; keep it under the webhook's timeoutSeconds.
    pub request_timeout: Duration,
    /// How long in-flight requests may finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// How long an HTTP/1 client may take to send its request headers (slow clients
    /// would otherwise hold connections open).
    pub header_read_timeout: Duration,
    /// Deadlines and caps per connection, whatever the protocol.
    pub connection: ConnectionLimits,
}

/// What one connection may hold: without these, a client that finishes TLS and then sends
/// nothing (or only the HTTP/2 preface) keeps one of the [`MAX_CONNECTIONS`] slots forever.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// From accept to a finished TLS handshake and the first complete request head (HTTP/1
    /// headers or an HTTP/2 HEADERS frame); a connection that has not got that far is closed.
    pub first_request: Duration,
    /// A connection with no request in flight for this long is closed. Longer than the idle
    /// timeout of Go's HTTP transport (90 s, the API server's), so the caller normally
    /// closes first and never races a new request against our close.
    pub idle: Duration,
    /// HTTP/2 PING interval, and how long a PING may go unanswered before the connection
    /// is dropped (a peer that vanished without a FIN).
    pub h2_keep_alive: Duration,
    /// Concurrent HTTP/2 streams per connection (hyper's default is 200).
    pub h2_max_streams: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            first_request: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            h2_keep_alive: Duration::from_secs(30),
            h2_max_streams: 32,
        }
    }
}

/// Connections served at once; more wait in the kernel's accept queue. The API server
/// keeps a few pooled connections per replica, so this only bounds misbehaving clients.
const MAX_CONNECTIONS: usize = 512;

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then stops accepting
/// and lets in-flight connections finish within the grace period.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let conn = Connection {
                        acceptor: acceptor.clone(),
                        app: app.clone(),
                        watcher: graceful.watcher(),
                        header_read_timeout: limits.header_read_timeout,
                        limits: limits.connection,
                    };
                    tokio::spawn(async move {
                        conn.serve(tcp, peer).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over; closing remaining connections");
    }
}

/// What one accepted connection needs to be served.
struct Connection {
    acceptor: TlsAcceptor,
    app: Router,
    watcher: hyper_util::server::graceful::Watcher,
    header_read_timeout: Duration,
    limits: ConnectionLimits,
}

impl Connection {
    async fn serve(self, tcp: tokio::net::TcpStream, peer: SocketAddr) {
        let accepted = tokio::time::Instant::now();
        let handshake = self.acceptor.accept(tcp);
        let tls =
            match tokio::time::timeout_at(accepted + self.limits.first_request, handshake).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
        let (activity, watched) = tokio::sync::watch::channel(Activity::new(accepted));
        let app = self.app;
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let in_flight = InFlight::start(&activity);
                let app = app.clone();
                async move {
                    let response = tower::ServiceExt::oneshot(app, req).await;
                    drop(in_flight);
                    response
                }
            });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(self.limits.h2_keep_alive))
            .keep_alive_timeout(self.limits.h2_keep_alive)
            .max_concurrent_streams(self.limits.h2_max_streams);
        let conn = self
            .watcher
            .watch(builder.serve_connection(TokioIo::new(tls), service));
        tokio::select! {
            result = conn => if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            },
            why = stalled(watched, self.limits) => {
                tracing::debug!(%peer, why, "closing connection");
            }
        }
    }
}

/// What a connection's requests have done so far.
#[derive(Clone, Copy, Debug)]
struct Activity {
    requests: u64,
    in_flight: usize,
    /// When the connection was accepted or its last request finished.
    since: tokio::time::Instant,
}

impl Activity {
    fn new(accepted: tokio::time::Instant) -> Self {
        Self {
            requests: 0,
            in_flight: 0,
            since: accepted,
        }
    }
}

/// Marks a request in flight on its connection until dropped (also when the request's
/// future is dropped, e.g. by the request timeout).
struct InFlight(tokio::sync::watch::Sender<Activity>);

impl InFlight {
    fn start(activity: &tokio::sync::watch::Sender<Activity>) -> Self {
        activity.send_modify(|a| {
            a.requests += 1;
            a.in_flight += 1;
        });
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            a.since = tokio::time::Instant::now();
        });
    }
}

/// Resolves when the connection should be closed: no first request within
/// `first_request` of accept, or nothing in flight for `idle`. Never while a request runs
/// (the request timeout bounds those).
async fn stalled(
    mut activity: tokio::sync::watch::Receiver<Activity>,
    limits: ConnectionLimits,
) -> &'static str {
    loop {
        let now = *activity.borrow_and_update();
        let deadline = match now {
            Activity {
                requests: 0, since, ..
            } => Some((
                since + limits.first_request,
                "no request before the deadline",
            )),
            Activity {
                in_flight: 0,
                since,
                ..
            } => Some((since + limits.idle, "idle")),
            _ => None,
        };
        let changed = activity.changed();
        match deadline {
            Some((at, why)) => tokio::select! {
                () = tokio::time::sleep_until(at) => return why,
                changed = changed => if changed.is_err() {
                    // The service is gone: the connection is ending by itself.
                    return std::future::pending().await;
                },
            },
            None => {
                if changed.await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}
