use super::*;

#[tokio::test(start_paused = true)]
async fn only_bytes_between_requests_start_a_head() {
    let clock = HeadClock::default();
    clock.bytes_arrived();
    assert_eq!(clock.head_started(), None, "not armed: TLS handshake bytes");
    clock.arm();
    tokio::time::advance(std::time::Duration::from_secs(3)).await;
    assert_eq!(clock.head_started(), None, "idle time starts nothing");
    let first = Instant::now();
    clock.bytes_arrived();
    tokio::time::advance(std::time::Duration::from_millis(10)).await;
    clock.bytes_arrived();
    assert_eq!(clock.head_started(), Some(first), "the head's first byte");
    clock.disarm();
    clock.bytes_arrived();
    assert_eq!(clock.head_started(), None, "a body is not a head");
}
