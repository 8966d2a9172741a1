//! Serving one accepted connection: its TLS handshake, HTTP/1 or HTTP/2, and the deadlines
//! that close it when it stalls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio_rustls::TlsAcceptor;

use super::ConnectionLimits;
use super::silence::Silence;
use super::table::Ticket;

/// What one accepted connection needs to be served.
pub(super) struct Connection {
    pub(super) acceptor: TlsAcceptor,
    pub(super) app: Router,
    pub(super) watcher: hyper_util::server::graceful::Watcher,
    pub(super) header_read_timeout: Duration,
    pub(super) limits: ConnectionLimits,
}

impl Connection {
    /// Serves the connection until it ends, is closed by its deadlines, or is closed to make
    /// room for a newer one while it has not sent a request.
    pub(super) async fn serve(self, tcp: Silence, peer: SocketAddr, ticket: Ticket) {
        let ticket = Arc::new(ticket);
        let evict = ticket.evict.clone();
        tokio::select! {
            () = self.serve_tls(tcp, peer, Arc::clone(&ticket)) => {}
            () = evict.cancelled() => {
                tracing::debug!(%peer, "closing a connection without requests to make room");
            }
        }
    }

    async fn serve_tls(self, tcp: Silence, peer: SocketAddr, ticket: Arc<Ticket>) {
        let accepted = tokio::time::Instant::now();
        let handshake = self.acceptor.accept(tcp);
        let tls =
            match tokio::time::timeout_at(accepted + self.limits.first_request, handshake).await {
                Ok(Ok(tls)) => {
                    ticket.handshake_done();
                    tls
                }
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
                ticket.prove();
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
