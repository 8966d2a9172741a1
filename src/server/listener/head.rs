//! When an HTTP/1 request head started arriving, so that its deadline counts from its first byte
//! (hyper's own header-read timeout also counted the idle time between requests on a kept-alive
//! connection, and reset requests reusing one at 10 s). The stream's reads report bytes
//! ([`HeadClock::bytes_arrived`]); the clock counts them only while armed, between requests of an
//! HTTP/1 connection; HTTP/2 never arms it. A head pipelined behind a request lands in hyper's
//! buffer unseen: a client that pipelines part of a head and stalls is closed by the idle limit
//! instead (Go's HTTP transport, the API server's, never pipelines).

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

#[derive(Default)]
struct State {
    armed: bool,
    started: Option<Instant>,
}

/// One connection's clock.
#[derive(Default)]
pub(super) struct HeadClock {
    state: Mutex<State>,
    /// Told when a head starts, for the connection's deadline watcher.
    pub(super) started: tokio::sync::Notify,
}

impl HeadClock {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived on the connection: the first ones while armed start a head.
    pub(super) fn bytes_arrived(&self) {
        let mut state = self.state();
        if state.armed && state.started.is_none() {
            state.started = Some(Instant::now());
            drop(state);
            self.started.notify_one();
        }
    }

    /// No request in flight on an HTTP/1 connection: the next bytes start a head.
    pub(super) fn arm(&self) {
        *self.state() = State {
            armed: true,
            started: None,
        };
    }

    /// A request reached the service (its head is complete), or the connection speaks HTTP/2:
    /// bytes are a body, pipelined heads or HTTP/2 frames, not a head to time.
    pub(super) fn disarm(&self) {
        *self.state() = State::default();
    }

    /// When the head now arriving started, if one is.
    pub(super) fn head_started(&self) -> Option<Instant> {
        self.state().started
    }
}

#[cfg(test)]
mod tests;
