//! Serving one accepted connection: its TLS handshake, HTTP/1 or HTTP/2, and the deadlines
//! that close it when it stalls: the first request within `first_request` of accept, an
//! HTTP/1 request head within `header_read_timeout` of its first byte ([`super::head`]), and
//! nothing in flight for `idle`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::ConnectionLimits;
use super::head::HeadClock;
use super::silence::Silence;
use super::table::Ticket;

/// What one accepted connection needs to be served.
pub(super) struct Connection {
    pub(super) acceptor: TlsAcceptor,
    pub(super) app: Router,
    pub(super) watcher: hyper_util::server::graceful::Watcher,
    pub(super) header_read_timeout: Duration,
    pub(super) limits: ConnectionLimits,
    /// When an HTTP/1 request head started arriving (its TCP reads report to it).
    pub(super) head: Arc<HeadClock>,
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
        let accepted = Instant::now();
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
        // HTTP/2 by ALPN (a prior-knowledge HTTP/2 client is told apart by its first request):
        // only HTTP/1 heads are timed.
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        if !h2 {
            self.head.arm();
        }
        let (activity, watched) = watch::channel(Activity {
            requests: 0,
            in_flight: 0,
            since: accepted,
        });
        let app = self.app;
        let head = Arc::clone(&self.head);
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                ticket.prove();
                let http1 = req.version() < hyper::Version::HTTP_2;
                let in_flight = InFlight::start(&activity, &head, http1);
                let app = app.clone();
                async move {
                    let response = tower::ServiceExt::oneshot(app, req).await;
                    drop(in_flight);
                    response
                }
            });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // hyper's header-read timeout would also count the idle time before each request
        // (module doc of `head`): the head deadline is `stalled`'s.
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(None);
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
            why = stalled(watched, &self.head, self.header_read_timeout, self.limits) => {
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
    since: Instant,
}

/// Marks a request in flight on its connection until dropped (also when the request's
/// future is dropped, e.g. by the request timeout); while one is, no head is timed.
struct InFlight {
    activity: watch::Sender<Activity>,
    head: Arc<HeadClock>,
    /// An HTTP/1 request: once none is in flight, the next bytes start a head.
    http1: bool,
}

impl InFlight {
    fn start(activity: &watch::Sender<Activity>, head: &Arc<HeadClock>, http1: bool) -> Self {
        head.disarm();
        activity.send_modify(|a| {
            a.requests += 1;
            a.in_flight += 1;
        });
        Self {
            activity: activity.clone(),
            head: Arc::clone(head),
            http1,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.activity.send_modify(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            a.since = Instant::now();
            if a.in_flight == 0 && self.http1 {
                self.head.arm();
            }
        });
    }
}

/// Resolves when the connection should be closed: no first request within
/// `first_request` of accept, an HTTP/1 request head not finished within `head_timeout` of its
/// first byte, or nothing in flight for `idle`. Never while a request runs (the request
/// timeout bounds those).
async fn stalled(
    mut activity: watch::Receiver<Activity>,
    head: &HeadClock,
    head_timeout: Duration,
    limits: ConnectionLimits,
) -> &'static str {
    loop {
        let now = *activity.borrow_and_update();
        let started = head
            .head_started()
            .map(|at| (at + head_timeout, "request head too slow"));
        let deadline = match (now.requests, now.in_flight) {
            (0, _) => Some((
                now.since + limits.first_request,
                "no request before the deadline",
            )),
            (_, 0) => Some((now.since + limits.idle, "idle")),
            _ => None,
        };
        // A head being read may end sooner than either (never while a request is in flight:
        // the clock is disarmed then).
        let deadline = deadline
            .into_iter()
            .chain(started)
            .min_by_key(|(at, _)| *at);
        let due = async {
            match deadline {
                Some((at, why)) => {
                    tokio::time::sleep_until(at).await;
                    why
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            why = due => return why,
            () = head.started.notified() => {},
            changed = activity.changed() => if changed.is_err() {
                // The service is gone: the connection is ending by itself.
                return std::future::pending().await;
            },
        }
    }
}
