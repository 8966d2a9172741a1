//! Telling a client that keeps the guard waiting from one whose bytes wait for the guard's
//! CPU: a connection's reads report to a [`ClientWait`] until it is proven (and, all along,
//! to its [`HeadClock`] when bytes arrive).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::head::HeadClock;

/// Whether the guard is waiting for a connection's client: since when a read has been
/// pending with no data arriving. Reads register a waker of their own that clears it as the
/// data arrives, so a connection whose bytes wait for the guard's CPU never looks silent.
pub(super) struct ClientWait {
    state: Mutex<WaitState>,
    /// Set once the connection is proven: its reads pass straight through from then on.
    pub(super) done: AtomicBool,
    /// The table's: told when the client falls silent.
    room: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
pub(super) struct WaitState {
    pub(super) since: Option<tokio::time::Instant>,
    /// The connection task's waker, woken after `since` is cleared.
    task: Option<std::task::Waker>,
}

impl ClientWait {
    pub(super) fn new(room: Arc<tokio::sync::Notify>) -> Self {
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

    pub(super) fn waiting_since(&self) -> Option<tokio::time::Instant> {
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
/// proven, and every read that brings bytes to its [`HeadClock`].
pub(super) struct Silence {
    tcp: tokio::net::TcpStream,
    wait: Arc<ClientWait>,
    head: Arc<HeadClock>,
}

impl Silence {
    pub(super) fn watch(
        tcp: tokio::net::TcpStream,
        wait: Arc<ClientWait>,
        head: Arc<HeadClock>,
    ) -> Self {
        Self { tcp, wait, head }
    }
}

impl tokio::io::AsyncRead for Silence {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let read = this.poll_read_watched(cx, buf);
        if matches!(read, std::task::Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.head.bytes_arrived();
        }
        read
    }
}

impl Silence {
    fn poll_read_watched(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self;
        let wait = &this.wait;
        if wait.done.load(Ordering::Relaxed) {
            return tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut this.tcp), cx, buf);
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
        let read =
            tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut this.tcp), &mut reporting, buf);
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

#[cfg(test)]
mod tests;
