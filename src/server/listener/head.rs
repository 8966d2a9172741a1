//! When an HTTP/1 request head started arriving, so that its deadline counts from its first
//! byte. hyper's own header-read timeout starts as soon as it waits for the next request on a
//! kept-alive connection, so it also counted the time the connection sat idle between requests:
//! it closed idle HTTP/1 connections at 10 s, far inside the idle limit, and a client that reused
//! one at that moment had its request reset (seen once: a probe's `GET /metrics` after 10 s of
//! quiet). Here the idle time is the idle limit's, and a head that started and does not finish is
//! cut at the head deadline ([`super::connection`]'s `stalled`).
//!
//! The reads of the connection's TCP stream report bytes ([`HeadClock::bytes_arrived`]); the
//! clock counts them only while it is armed: between requests of an HTTP/1 connection, from the
//! end of its TLS handshake. HTTP/2 connections never arm it (PING answers and window updates
//! arrive while they idle; their first request is bounded by the first-request deadline).
//!
//! A head pipelined behind a request (sent before that request's answer) arrives while the clock
//! is disarmed, often in the same read as the request before it, and hyper keeps it in its own
//! buffer: nothing here sees it start. A client that pipelines part of a head and stalls is
//! closed by the idle limit instead (120 s by default; the connection cap bounds how many such
//! connections there can be). Go's HTTP transport, the API server's, never pipelines.

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
