//! Telling a client that keeps the guard waiting from one whose bytes wait for the guard's
//! CPU: a connection's reads report to a [`ClientWait`] until it is proven (and, all along,
//! to its [`HeadClock`] when bytes arrive).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::head::HeadClock;

/// Whether the guard is waiting for a connection's client: since when a read has been
/// pending with no data arriving. Reads register a waker of their own that clears it as the
/// data arrives, so a connection whose bytes wait for the guard's CPU never looks silent.
pub(super) struct ClientWait {
    state: Mutex<WaitState>,
    /// Set once the connection is proven: its reads pass straight through from then on.
    pub(super) done: AtomicBool,
    /// The table's: told when the client falls silent.
    room: Arc<Notify>,
}

#[derive(Default)]
pub(super) struct WaitState {
    pub(super) since: Option<Instant>,
    /// The connection task's waker, woken after `since` is cleared.
    task: Option<Waker>,
}

impl ClientWait {
    pub(super) fn new(room: Arc<Notify>) -> Self {
        Self {
            state: Mutex::default(),
            done: AtomicBool::new(false),
            room,
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, WaitState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn waiting_since(&self) -> Option<Instant> {
        self.state().since
    }
}

impl Wake for ClientWait {
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
/// proven, and every read that brings bytes to its [`HeadClock`].
pub(super) struct Silence {
    tcp: TcpStream,
    wait: Arc<ClientWait>,
    head: Arc<HeadClock>,
}

impl Silence {
    pub(super) fn watch(tcp: TcpStream, wait: Arc<ClientWait>, head: Arc<HeadClock>) -> Self {
        Self { tcp, wait, head }
    }

    fn poll_read_watched(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let wait = &self.wait;
        if wait.done.load(Ordering::Relaxed) {
            return AsyncRead::poll_read(Pin::new(&mut self.tcp), cx, buf);
        }
        {
            // Marked before the read: data arriving during it clears the mark again. A client
            // falling silent may make room: the accept loop is told.
            let mut state = wait.state();
            if state.since.is_none() {
                state.since = Some(Instant::now());
                wait.room.notify_one();
            }
            state.task = Some(cx.waker().clone());
        }
        let waker = Waker::from(Arc::clone(wait));
        let mut reporting = Context::from_waker(&waker);
        let read = AsyncRead::poll_read(Pin::new(&mut self.tcp), &mut reporting, buf);
        if read.is_ready() {
            wait.state().since = None;
        }
        read
    }
}

impl AsyncRead for Silence {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let read = this.poll_read_watched(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.head.bytes_arrived();
        }
        read
    }
}

impl AsyncWrite for Silence {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
