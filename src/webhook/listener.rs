//! The HTTPS listener: the TLS accept loop, per-connection deadlines and caps, room for new
//! connections when clients hold connections without sending requests, and a graceful
//! shutdown that lets requests in flight finish.
//!
//! **Room for new connections.** A connection is *unproven* from accept until its first
//! request reaches the service (a complete HTTP/1 request head or HTTP/2 HEADERS frame), and
//! *proven* from then on. A client that finishes TLS and then sends nothing (or only the
//! HTTP/2 preface) stays unproven; so does one that never finishes its handshake. Unproven
//! connections are bounded ([`MAX_UNPROVEN`], half the slots) and, when a new connection needs
//! their room, closed oldest first; a proven connection is never closed to make room, so a
//! connection that carries requests (the API server's) is not cut. It still obeys the idle
//! limit; only when proven connections fill every slot do new ones wait in the accept queue.
//!
//! Which unproven connection goes: one whose client keeps the guard waiting. A read that is
//! pending with no data arriving marks its connection *silent* (the reads register a waker of
//! their own, so a connection whose bytes have arrived but wait for the guard's CPU is never
//! silent, however loaded the guard is). First to go is the oldest connection that finished
//! its TLS handshake and is silent: it sent no request, and a real client sends its request
//! with its last handshake message, so it has had as long as the newer ones took to finish
//! their handshakes. Else a handshake whose client has been silent for [`CLIENT_SILENCE`] (a
//! client that never sends its ClientHello, or stops halfway). A handshake that is merely slow
//! is never cut: closing the oldest connection regardless would let a flood that reconnects as
//! soon as it is closed cut everyone's handshake, the real client's included. When nothing
//! may go yet, new connections wait in the kernel's queue; so do they while
//! [`MAX_HANDSHAKES`] handshakes run. The loop thus accepts as fast as handshakes finish or
//! clients fall silent, never faster.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

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
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            // SAFETY: setrlimit only reads the struct it is given; raising the soft limit up
            // to the hard one needs no privilege (it fails harmlessly above the kernel's
            // nr_open, and then the old limit stays).
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } == 0 {
                return Some(raised.rlim_cur);
            }
        }
        Some(limit.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
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
                    let conn = Connection {
                        acceptor: acceptor.clone(),
                        app: app.clone(),
                        watcher: graceful.watcher(),
                        header_read_timeout: limits.header_read_timeout,
                        limits: limits.connection,
                    };
                    tokio::spawn(conn.serve(Silence::watch(tcp, silence), peer, ticket));
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

/// The connections being served, by stage: unproven ones in their TLS handshake (by accept
/// order) and past it (by the order they finished it), and a count of the proven ones.
struct Table {
    slots: Mutex<Slots>,
    max: usize,
    max_unproven: usize,
    max_handshakes: usize,
    silence: Duration,
    /// Signalled whenever a connection ends, finishes its handshake or its client falls
    /// silent, for an accept loop waiting for room.
    room: Arc<tokio::sync::Notify>,
    /// Connections closed to make room, since start (logged).
    evicted: AtomicU64,
}

/// An unproven connection: cancelling the token closes it; the wait says whether its client
/// is silent.
type Unproven = (CancellationToken, Arc<ClientWait>);

#[derive(Default)]
struct Slots {
    /// In their TLS handshake, by accept number (the oldest first).
    handshaking: BTreeMap<u64, Unproven>,
    /// Past the handshake without a request yet, by the number of their handshake's end.
    awaiting: BTreeMap<u64, Unproven>,
    proven: usize,
    /// The last number given out (accepts and handshake ends share it).
    numbered: u64,
}

impl Slots {
    fn unproven(&self) -> usize {
        self.handshaking.len() + self.awaiting.len()
    }

    fn next(&mut self) -> u64 {
        self.numbered += 1;
        self.numbered
    }
}

/// Whether the accept loop may take in a connection now.
#[derive(Debug, PartialEq, Eq)]
enum Room {
    Now,
    /// When a client will have been silent long enough to close its connection for a newcomer.
    At(tokio::time::Instant),
    /// Once a connection ends, finishes its handshake, or its client falls silent.
    Later,
}

/// What [`Table::admit`] must close before the new connection fits.
#[derive(Debug, PartialEq, Eq)]
enum Victim {
    /// Nothing: there is room.
    None,
    /// That handshake, its client silent.
    Handshaking(u64),
    /// That connection past its handshake, its client silent.
    Awaiting(u64),
    /// Room is needed but nothing may be closed yet.
    Wait(Room),
}

/// The first connection of `stage` (the oldest) whose client has been silent for `silence` at
/// `now`, and otherwise the earliest time one will have been.
fn first_silent(
    stage: &BTreeMap<u64, Unproven>,
    silence: Duration,
    now: tokio::time::Instant,
) -> (Option<u64>, Option<tokio::time::Instant>) {
    let mut next = None::<tokio::time::Instant>;
    for (number, (_, wait)) in stage {
        if let Some(since) = wait.waiting_since() {
            let at = since + silence;
            if at <= now {
                return (Some(*number), None);
            }
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    (None, next)
}

impl Table {
    fn new(max: usize, max_unproven: usize, max_handshakes: usize, silence: Duration) -> Self {
        let max_unproven = max_unproven.clamp(1, max.max(1));
        Self {
            slots: Mutex::new(Slots::default()),
            max,
            max_unproven,
            max_handshakes: max_handshakes.clamp(1, max_unproven),
            silence,
            room: Arc::new(tokio::sync::Notify::new()),
            evicted: AtomicU64::new(0),
        }
    }

    /// Only counts and maps behind it: a panic elsewhere cannot leave it half-updated in a
    /// way that matters, so a poisoned lock is used as it is.
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What must go for one more connection to fit at `now`. A new connection starts a
    /// handshake, so at [`MAX_HANDSHAKES`] only a silent handshake may make room; at the
    /// unproven or the total cap, the oldest connection past its handshake whose client keeps
    /// a read waiting, else a silent handshake.
    fn victim(&self, slots: &Slots, now: tokio::time::Instant) -> Victim {
        let (handshake, handshake_next) = first_silent(&slots.handshaking, self.silence, now);
        let wait =
            |next: Option<tokio::time::Instant>| Victim::Wait(next.map_or(Room::Later, Room::At));
        if slots.handshaking.len() >= self.max_handshakes {
            return handshake.map_or_else(|| wait(handshake_next), Victim::Handshaking);
        }
        if slots.unproven() < self.max_unproven && slots.unproven() + slots.proven < self.max {
            return Victim::None;
        }
        // Past its handshake, a connection is silent as soon as a read waits for its client:
        // a real client sends its request with its last handshake message, and the oldest of
        // these has had as long as it took the newer ones to finish their handshakes.
        let (awaiting, _) = first_silent(&slots.awaiting, Duration::ZERO, now);
        match (awaiting, handshake) {
            (Some(a), _) => Victim::Awaiting(a),
            (None, Some(h)) => Victim::Handshaking(h),
            (None, None) => wait(handshake_next),
        }
    }

    /// Whether a new connection can be taken in at `now`, and if not, when to look again.
    fn room(&self, now: tokio::time::Instant) -> Room {
        match self.victim(&self.slots(), now) {
            Victim::Wait(room) => room,
            _ => Room::Now,
        }
    }

    /// Takes in a new connection, in its handshake, closing what [`Table::victim`] names until
    /// it fits. Checked against [`Table::room`] before the accept; if the room went meanwhile
    /// (an unproven connection proved itself), the new one is taken in over the cap, by one:
    /// the loop then waits for room. Returns its ticket and what its reads report to.
    fn admit(self: &Arc<Self>) -> (Ticket, Arc<ClientWait>) {
        let now = tokio::time::Instant::now();
        let mut slots = self.slots();
        loop {
            let closed = match self.victim(&slots, now) {
                Victim::None | Victim::Wait(_) => break,
                Victim::Handshaking(number) => slots.handshaking.remove(&number),
                Victim::Awaiting(number) => slots.awaiting.remove(&number),
            };
            let Some((token, _)) = closed else { break };
            token.cancel();
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        let number = slots.next();
        let evict = CancellationToken::new();
        let wait = Arc::new(ClientWait::new(Arc::clone(&self.room)));
        slots
            .handshaking
            .insert(number, (evict.clone(), Arc::clone(&wait)));
        let ticket = Ticket {
            table: Arc::clone(self),
            evict,
            wait: Arc::clone(&wait),
            stage: Mutex::new(Stage::Handshaking(number)),
            proven: AtomicBool::new(false),
        };
        (ticket, wait)
    }
}

/// Whether the guard is waiting for a connection's client: since when a read has been
/// pending with no data arriving. Reads register a waker of their own that clears it as the
/// data arrives, so a connection whose bytes wait for the guard's CPU never looks silent.
struct ClientWait {
    state: Mutex<WaitState>,
    /// Set once the connection is proven: its reads pass straight through from then on.
    done: AtomicBool,
    /// The table's: told when the client falls silent.
    room: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct WaitState {
    since: Option<tokio::time::Instant>,
    /// The connection task's waker, woken after `since` is cleared.
    task: Option<std::task::Waker>,
}

impl ClientWait {
    fn new(room: Arc<tokio::sync::Notify>) -> Self {
        Self {
            state: Mutex::default(),
            done: AtomicBool::new(false),
            room,
        }
    }

    fn state(&self) -> MutexGuard<'_, WaitState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn waiting_since(&self) -> Option<tokio::time::Instant> {
        self.state().since
    }
}

impl std::task::Wake for ClientWait {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let task = {
            let mut state = self.state();
            state.since = None;
            state.task.take()
        };
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// A connection's TCP stream that reports to its [`ClientWait`] until the connection is
/// proven; then reads pass straight through.
struct Silence {
    tcp: tokio::net::TcpStream,
    wait: Arc<ClientWait>,
}

impl Silence {
    fn watch(tcp: tokio::net::TcpStream, wait: Arc<ClientWait>) -> Self {
        Self { tcp, wait }
    }
}

impl tokio::io::AsyncRead for Silence {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        let wait = &this.wait;
        if wait.done.load(Ordering::Relaxed) {
            return std::pin::Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        {
            // Marked before the read: data arriving during it clears the mark again. A client
            // falling silent may make room: the accept loop is told.
            let mut state = wait.state();
            if state.since.is_none() {
                state.since = Some(tokio::time::Instant::now());
                wait.room.notify_one();
            }
            state.task = Some(cx.waker().clone());
        }
        let waker = std::task::Waker::from(Arc::clone(wait));
        let mut reporting = std::task::Context::from_waker(&waker);
        let read = std::pin::Pin::new(&mut this.tcp).poll_read(&mut reporting, buf);
        if read.is_ready() {
            wait.state().since = None;
        }
        read
    }
}

impl tokio::io::AsyncWrite for Silence {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Where a connection is; its number is its key in [`Slots`]. A connection closed to make room
/// keeps its last stage here but is gone from the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Handshaking(u64),
    Awaiting(u64),
    Proven,
}

/// One connection's place in the [`Table`]; dropping it frees the place.
struct Ticket {
    table: Arc<Table>,
    /// Cancelled when the connection is closed to make room.
    evict: CancellationToken,
    /// Whether its client is silent; no longer watched once it is proven.
    wait: Arc<ClientWait>,
    /// Changed only with the table's lock held (taken first).
    stage: Mutex<Stage>,
    /// Set once the connection counts as proven (a lock-free check per request).
    proven: AtomicBool,
}

impl Ticket {
    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.stage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The TLS handshake is done: from now on the connection is among the first to close if
    /// it sends no request.
    fn handshake_done(&self) {
        {
            let mut slots = self.table.slots();
            let mut stage = self.stage();
            if let Stage::Handshaking(number) = *stage
                && let Some(unproven) = slots.handshaking.remove(&number)
            {
                let number = slots.next();
                slots.awaiting.insert(number, unproven);
                *stage = Stage::Awaiting(number);
            }
        }
        self.table.room.notify_one();
    }

    /// The connection's first request has arrived: from now on it is never closed to make
    /// room. (If it was chosen for closing a moment before, it closes anyway: the request
    /// reached the service in the microseconds between, and is lost with the connection.)
    fn prove(&self) {
        if self.proven.load(Ordering::Acquire) {
            return;
        }
        let mut slots = self.table.slots();
        let mut stage = self.stage();
        if let Stage::Awaiting(number) = *stage
            && slots.awaiting.remove(&number).is_some()
        {
            slots.proven += 1;
            *stage = Stage::Proven;
            self.proven.store(true, Ordering::Release);
            self.wait.done.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        {
            let mut slots = self.table.slots();
            // Absent if it was closed to make room: its place was already taken.
            match *self.stage() {
                Stage::Handshaking(number) => {
                    slots.handshaking.remove(&number);
                }
                Stage::Awaiting(number) => {
                    slots.awaiting.remove(&number);
                }
                Stage::Proven => slots.proven = slots.proven.saturating_sub(1),
            }
        }
        self.table.room.notify_one();
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
    /// Serves the connection until it ends, is closed by its deadlines, or is closed to make
    /// room for a newer one while it has not sent a request.
    async fn serve(self, tcp: Silence, peer: SocketAddr, ticket: Ticket) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SILENCE: Duration = Duration::from_millis(250);

    fn table(max: usize, max_unproven: usize, max_handshakes: usize) -> Arc<Table> {
        Arc::new(Table::new(max, max_unproven, max_handshakes, SILENCE))
    }

    /// (in their handshake, awaiting a request, proven)
    fn counts(t: &Table) -> (usize, usize, usize) {
        let slots = t.slots();
        (slots.handshaking.len(), slots.awaiting.len(), slots.proven)
    }

    fn closed(tickets: &[Ticket]) -> Vec<bool> {
        tickets.iter().map(|k| k.evict.is_cancelled()).collect()
    }

    fn admit(t: &Arc<Table>) -> Ticket {
        t.admit().0
    }

    /// As a read of the connection that found no data would.
    fn client_silent(wait: &ClientWait) {
        wait.state().since = Some(tokio::time::Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_whose_client_is_silent_goes_and_handshakes_are_capped() {
        let t = table(8, 8, 2);
        let (a, a_wait) = t.admit();
        let (_b, _) = t.admit();
        assert_eq!(
            t.room(tokio::time::Instant::now()),
            Room::Later,
            "two handshakes run and neither waits for its client: the next one waits"
        );
        client_silent(&a_wait);
        let now = tokio::time::Instant::now();
        assert_eq!(t.room(now), Room::At(now + SILENCE));
        tokio::time::advance(SILENCE).await;
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Now);
        let _c = admit(&t);
        assert!(a.evict.is_cancelled(), "the silent handshake went");
        assert_eq!(counts(&t), (2, 0, 0));
        assert_eq!(t.evicted.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_whose_data_waits_for_the_guard_is_not_silent() {
        let t = table(8, 8, 1);
        let (a, a_wait) = t.admit();
        client_silent(&a_wait);
        // Its bytes arrive: the read's waker fires, however long the task then waits to run.
        std::task::Wake::wake_by_ref(&a_wait);
        tokio::time::advance(SILENCE * 10).await;
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Later);
        let _b = admit(&t);
        assert!(
            !a.evict.is_cancelled(),
            "over the cap by one rather than cut"
        );
    }

    /// Admits a connection that finishes its handshake and then sends nothing, silent for
    /// long enough by the time this returns.
    async fn stalled_after_handshake(t: &Arc<Table>) -> Ticket {
        let (k, wait) = t.admit();
        k.handshake_done();
        client_silent(&wait);
        tokio::time::advance(SILENCE).await;
        k
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_unproven_cap_the_first_to_finish_its_handshake_silent_goes() {
        let t = table(8, 3, 3);
        let admitted: Vec<(Ticket, Arc<ClientWait>)> = (0..3).map(|_| t.admit()).collect();
        // Handshakes end in the order c, a, b.
        for i in [2, 0, 1] {
            admitted[i].0.handshake_done();
        }
        assert_eq!(
            t.room(tokio::time::Instant::now()),
            Room::Later,
            "no read waits for their clients yet"
        );
        // Then the guard waits for their requests, and nothing comes.
        for (_, wait) in &admitted {
            client_silent(wait);
        }
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Now);
        let tickets: Vec<Ticket> = admitted.into_iter().map(|(k, _)| k).collect();
        let _d = admit(&t);
        assert_eq!(closed(&tickets), [false, false, true]);
        let _e = admit(&t);
        assert_eq!(closed(&tickets), [true, false, true]);
        assert_eq!(counts(&t), (2, 1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_whose_request_is_on_its_way_is_not_closed() {
        let t = table(8, 1, 1);
        let (a, a_wait) = t.admit();
        a.handshake_done();
        client_silent(&a_wait);
        // Its request arrives; the guard has not read it yet.
        std::task::Wake::wake_by_ref(&a_wait);
        tokio::time::advance(SILENCE * 10).await;
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Later);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_unproven_cap_with_only_busy_handshakes_new_connections_wait() {
        let t = table(8, 2, 4);
        let (a, a_wait) = t.admit();
        let _b = admit(&t);
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Later);
        a.handshake_done();
        client_silent(&a_wait);
        tokio::time::advance(SILENCE).await;
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_proven_connection_is_never_closed_to_make_room() {
        let t = table(4, 4, 4);
        let (first, first_wait) = t.admit();
        first.handshake_done();
        first.prove();
        // Proven, then idle between requests: silent, and still never closed for room.
        client_silent(&first_wait);
        let mut rest = Vec::new();
        for _ in 0..10 {
            rest.push(stalled_after_handshake(&t).await);
        }
        assert!(!first.evict.is_cancelled(), "the proven connection stays");
        // Three unproven places remain beside it; the newest three hold them.
        let open: Vec<bool> = closed(&rest).into_iter().map(|c| !c).collect();
        assert_eq!(open.iter().filter(|o| **o).count(), 3);
        assert!(open[7..].iter().all(|o| *o), "the newest stay: {open:?}");
        assert_eq!(counts(&t), (0, 3, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn when_proven_connections_fill_every_slot_new_ones_wait() {
        let t = table(3, 2, 2);
        let proven: Vec<Ticket> = (0..3)
            .map(|_| {
                let k = admit(&t);
                k.handshake_done();
                k.prove();
                k
            })
            .collect();
        assert_eq!(counts(&t), (0, 0, 3));
        tokio::time::advance(SILENCE * 100).await;
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Later);
        drop(proven);
        assert_eq!(counts(&t), (0, 0, 0));
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_connection_frees_its_place_once_and_never_proves() {
        let t = table(4, 2, 2);
        let a = stalled_after_handshake(&t).await;
        let b = stalled_after_handshake(&t).await;
        let (c, _) = t.admit(); // closes a
        assert!(a.evict.is_cancelled());
        a.prove();
        drop(a); // already out of the table: changes nothing
        assert_eq!(counts(&t), (1, 1, 0));
        b.prove();
        b.prove();
        assert_eq!(counts(&t), (1, 0, 1));
        drop(b);
        c.handshake_done();
        drop(c);
        assert_eq!(counts(&t), (0, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_closed_for_room_does_not_come_back_when_it_ends() {
        let t = table(4, 4, 1);
        let (a, a_wait) = t.admit();
        client_silent(&a_wait);
        tokio::time::advance(SILENCE).await;
        let _b = admit(&t); // closes a
        assert!(a.evict.is_cancelled());
        a.handshake_done();
        assert_eq!(counts(&t), (1, 0, 0));
    }

    #[tokio::test]
    async fn a_pending_read_marks_the_client_silent_until_its_data_arrives() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = bind(([127, 0, 0, 1], 0).into()).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let wait = Arc::new(ClientWait::new(Arc::default()));
        let mut watched = Silence::watch(server, Arc::clone(&wait));
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            watched.read_exact(&mut byte).await.map(|_| byte[0])
        });
        for _ in 0..100 {
            if wait.waiting_since().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            wait.waiting_since().is_some(),
            "a read waits for the client"
        );
        client.write_all(b"x").await.expect("write");
        let byte = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("read")
            .expect("reader")
            .expect("byte");
        assert_eq!(byte, b'x');
        assert_eq!(wait.waiting_since(), None, "the data ended the silence");
    }

    #[tokio::test]
    async fn the_accept_loop_is_woken_when_a_slot_frees() {
        let t = table(1, 1, 1);
        let only = admit(&t);
        only.handshake_done();
        only.prove();
        assert_eq!(t.room(tokio::time::Instant::now()), Room::Later);
        let waiter = {
            let t = Arc::clone(&t);
            tokio::spawn(async move {
                while t.room(tokio::time::Instant::now()) != Room::Now {
                    t.room.notified().await;
                }
            })
        };
        tokio::task::yield_now().await;
        drop(only);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("waiter");
    }

    #[cfg(unix)]
    #[test]
    fn the_open_files_limit_is_at_its_hard_limit() {
        let limit = raise_open_files_limit().expect("readable");
        assert!(limit >= 256, "{limit}");
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut now) },
            0
        );
        assert_eq!(now.rlim_cur, limit);
    }
}
