use super::*;

fn spec(holder: Option<&str>, seconds: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: holder.map(str::to_string),
        lease_duration_seconds: Some(seconds),
        ..Default::default()
    }
}

#[test]
fn the_holder_renews() {
    assert_eq!(
        decide(&spec(Some("a"), 10), "a", Duration::from_secs(60)),
        Move::Renew
    );
}

#[test]
fn a_free_or_given_up_lease_is_taken_at_once() {
    assert_eq!(decide(&spec(None, 10), "b", Duration::ZERO), Move::TakeOver);
    assert_eq!(
        decide(&spec(Some(""), 1), "b", Duration::ZERO),
        Move::TakeOver
    );
}

#[test]
fn a_live_holder_is_waited_for_until_silent_for_a_whole_duration() {
    let held = spec(Some("a"), 10);
    assert_eq!(decide(&held, "b", Duration::from_secs(9)), Move::Wait);
    assert_eq!(decide(&held, "b", Duration::from_secs(10)), Move::TakeOver);
}
