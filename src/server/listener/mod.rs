//! The HTTPS listener: the TLS accept loop, per-connection deadlines and caps, room for new
//! connections when clients hold connections without sending requests, and a graceful shutdown
//! that lets requests in flight finish. One connection is served by hyper-util's `auto::Builder`
//! over tokio-rustls; why the rest is ours: docs/design.md, "Crates tried, and why not".
//!
//! A connection is *unproven* from accept until its first request reaches the service (a whole
//! HTTP/1 head or HTTP/2 HEADERS frame), *proven* from then on. Unproven connections are bounded
//! ([`MAX_UNPROVEN`], half the slots) and closed to make room, a silent one first ([`table`]); a
//! proven one never is, so the API server's connections are not cut. When nothing may go, and
//! while [`MAX_HANDSHAKES`] handshakes run, newcomers wait in the kernel's queue.

mod connection;
mod head;
mod silence;
mod table;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use connection::Connection;
use head::HeadClock;
use silence::Silence;
use table::{Room, Table};

#[derive(Debug)]
pub struct Limits {
    /// Whole-request deadline; keep it under the webhook's timeoutSeconds.
    pub request_timeout: Duration,
    /// How long in-flight requests may finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// How long an HTTP/1 client may take to send a request head, from its first byte (slow
    /// clients would otherwise hold connections open); the time a kept-alive connection idles
    /// before it is the idle limit's.
    pub header_read_timeout: Duration,
    /// Deadlines and caps per connection, whatever the protocol.
    pub connection: ConnectionLimits,
}

/// What one connection may hold: without these, a client that finishes TLS and then sends
/// nothing (or only the HTTP/2 preface) keeps one of the [`MAX_CONNECTIONS`] slots until
/// something closes it.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// From accept to a finished TLS handshake and the first complete request head (HTTP/1
    /// headers or an HTTP/2 HEADERS frame); a connection that has not got that far is closed
    /// (sooner if a new connection needs its slot).
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

/// Connections served at once. The API server keeps a few pooled connections per replica, so
/// this only bounds misbehaving clients (and the memory they cost).
pub const MAX_CONNECTIONS: usize = 512;

/// Unproven connections (no request yet) held at once; a new connection beyond it closes one.
/// Half of [`MAX_CONNECTIONS`], so clients that send nothing never hold more than half the
/// slots.
pub const MAX_UNPROVEN: usize = 256;

/// TLS handshakes run at once. Handshakes are CPU work: more at once only makes each take
/// longer, and a bound keeps a flood from taking in connections faster than it can serve them.
pub const MAX_HANDSHAKES: usize = 64;

/// How long the client of a connection in its TLS handshake may leave the guard waiting for
/// its next bytes before the connection may be closed for a newcomer. A real client answers
/// within a round trip and its own CPU time (a millisecond or so between the API server and
/// its webhook); the time its bytes wait for the guard's CPU does not count.
pub const CLIENT_SILENCE: Duration = Duration::from_millis(250);

/// The kernel's queue of connections not yet accepted. tokio's `bind` asks for 128; a burst of
/// connections larger than that drops SYNs, and the client resends its SYN only after a
/// second. Linux caps it at `net.core.somaxconn` (4096 by default since 5.4).
const ACCEPT_BACKLOG: u32 = 4096;

/// How often the count of connections closed to make room is logged while it grows.
const EVICTION_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Binds `addr` with a deep accept queue ([`ACCEPT_BACKLOG`]), for [`serve`].
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As std and tokio do: a restarted guard can bind at once while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Raises this process's soft limit of open files to its hard limit, and returns the limit in
/// force. Each connection is a file descriptor; a soft limit of 1024 (common outside
/// containers) would make accept fail long before [`MAX_CONNECTIONS`] plus the accept queue,
/// the watches and the API client are open. `None` if the limit cannot be read.
pub fn raise_open_files_limit() -> Option<u64> {
    // Raising it fails harmlessly above the kernel's nr_open; then the old limit stays.
    rlimit::increase_nofile_limit(u64::MAX)
        .or_else(|_| rlimit::Resource::NOFILE.get().map(|(soft, _)| soft))
        .ok()
}

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
    let table = Arc::new(Table::new(
        MAX_CONNECTIONS,
        MAX_UNPROVEN,
        MAX_HANDSHAKES,
        CLIENT_SILENCE,
    ));
    let mut shutdown = std::pin::pin!(shutdown);
    let mut reported = (tokio::time::Instant::now(), 0);
    'serve: loop {
        // Room for one more: a free slot, or a silent unproven connection to close for it.
        // Else wait for a connection to end or finish its handshake, or for a client to have
        // been silent long enough; new connections queue in the kernel meanwhile.
        loop {
            let wake = match table.room(tokio::time::Instant::now()) {
                Room::Now => break,
                Room::At(at) => at,
                // Far enough: a connection's end or handshake notifies before.
                Room::Later => tokio::time::Instant::now() + CLIENT_SILENCE,
            };
            tokio::select! {
                () = table.room.notified() => {}
                () = tokio::time::sleep_until(wake) => {}
                () = &mut shutdown => break 'serve,
            }
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let (ticket, silence) = table.admit();
                    let head = Arc::new(HeadClock::default());
                    let conn = Connection {
                        acceptor: acceptor.clone(),
                        app: app.clone(),
                        watcher: graceful.watcher(),
                        header_read_timeout: limits.header_read_timeout,
                        limits: limits.connection,
                        head: Arc::clone(&head),
                    };
                    let tcp = Silence::watch(tcp, silence, head);
                    tokio::spawn(conn.serve(tcp, peer, ticket));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
        let evicted = table.evicted.load(Ordering::Relaxed);
        if evicted > reported.1 && reported.0.elapsed() >= EVICTION_REPORT_EVERY {
            tracing::warn!(
                closed = evicted - reported.1,
                total = evicted,
                "closed connections that had sent no request, to make room for new ones: \
                 something opens connections to the webhook port and does not use them"
            );
            reported = (tokio::time::Instant::now(), evicted);
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

#[cfg(test)]
mod tests;
