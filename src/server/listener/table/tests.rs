//! The table's choices, on paused time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::server::listener::silence::ClientWait;

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
