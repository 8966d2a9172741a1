//! Which connections hold the [`MAX_CONNECTIONS`](super::MAX_CONNECTIONS) slots, by stage, and
//! which unproven one goes when a newcomer needs its room: the oldest past its handshake whose
//! client is silent (a read waits on it; bytes waiting for the guard's CPU never count), else a
//! handshake silent for [`CLIENT_SILENCE`](super::CLIENT_SILENCE). A handshake merely slow is never
//! cut: closing the oldest regardless would let a reconnecting flood cut everyone's handshake.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::silence::ClientWait;

/// The connections being served, by stage: unproven ones in their TLS handshake (by accept
/// order) and past it (by the order they finished it), and a count of the proven ones.
pub(super) struct Table {
    slots: Mutex<Slots>,
    max: usize,
    max_unproven: usize,
    max_handshakes: usize,
    silence: Duration,
    /// Signalled whenever a connection ends, finishes its handshake or its client falls
    /// silent, for an accept loop waiting for room.
    pub(super) room: Arc<tokio::sync::Notify>,
    /// Connections closed to make room, since start (logged).
    pub(super) evicted: AtomicU64,
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
pub(super) enum Room {
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
    pub(super) fn new(
        max: usize,
        max_unproven: usize,
        max_handshakes: usize,
        silence: Duration,
    ) -> Self {
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
    /// handshake, so at [`MAX_HANDSHAKES`](super::MAX_HANDSHAKES) only a silent handshake may make room; at the
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
    pub(super) fn room(&self, now: tokio::time::Instant) -> Room {
        match self.victim(&self.slots(), now) {
            Victim::Wait(room) => room,
            _ => Room::Now,
        }
    }

    /// Takes in a new connection, in its handshake, closing what [`Table::victim`] names until
    /// it fits. Checked against [`Table::room`] before the accept; if the room went meanwhile
    /// (an unproven connection proved itself), the new one is taken in over the cap, by one:
    /// the loop then waits for room. Returns its ticket and what its reads report to.
    pub(super) fn admit(self: &Arc<Self>) -> (Ticket, Arc<ClientWait>) {
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

/// Where a connection is; its number is its key in [`Slots`]. A connection closed to make room
/// keeps its last stage here but is gone from the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Handshaking(u64),
    Awaiting(u64),
    Proven,
}

/// One connection's place in the [`Table`]; dropping it frees the place.
pub(super) struct Ticket {
    table: Arc<Table>,
    /// Cancelled when the connection is closed to make room.
    pub(super) evict: CancellationToken,
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
    pub(super) fn handshake_done(&self) {
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
    pub(super) fn prove(&self) {
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

#[cfg(test)]
mod tests;
