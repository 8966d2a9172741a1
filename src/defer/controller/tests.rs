use super::*;

fn api_error(code: u16, reason: &str) -> Error {
    Error::Patch {
        name: "worker".into(),
        source: kube::Error::Api(
            kube::core::Status::failure("rejected", reason)
                .with_code(code)
                .boxed(),
        ),
    }
}

#[test]
fn only_a_conflict_is_retried_at_once() {
    let conflict = api_error(409, "Conflict");
    assert_eq!(conflict.failure(), Failure::Conflict);
    assert_eq!(retry_after(conflict.failure(), 7), CONFLICT_RETRY);
    let stale = Error::Stale {
        name: "worker".into(),
    };
    assert_eq!(retry_after(stale.failure(), 7), CONFLICT_RETRY);

    // A 422 that is not a stale read (a CRD rule, an admission policy) backs off like any
    // other failure instead of looping every 200 ms.
    let invalid = api_error(422, "Invalid");
    assert_eq!(invalid.failure(), Failure::Invalid);
    let waits: Vec<u64> = (1..=5)
        .map(|a| retry_after(invalid.failure(), a).as_secs())
        .collect();
    assert_eq!(waits, [1, 2, 4, 8, 10]);

    assert_eq!(api_error(403, "Forbidden").failure(), Failure::Forbidden);
    assert_eq!(api_error(500, "InternalError").failure(), Failure::Other);
    let timeout = Error::PatchTimeout {
        name: "worker".into(),
    };
    assert_eq!(timeout.failure(), Failure::Timeout);
    for f in [Failure::Forbidden, Failure::Other, Failure::Timeout] {
        assert_eq!(retry_after(f, 1), FIRST_RETRY, "{f:?}");
    }
}

#[test]
fn a_422_is_stale_only_when_the_object_changed() {
    let mut mosc = MachineOSConfig::default();
    mosc.metadata.resource_version = Some("10".into());
    assert!(!changed_since(Some("10"), Some(&mosc)));
    assert!(changed_since(Some("9"), Some(&mosc)));
    assert!(changed_since(Some("10"), None), "gone counts as changed");
}

#[test]
fn backoff_grows_then_stays_at_the_cap() {
    let seconds: Vec<u64> = (1..=7).map(|a| backoff(a).as_secs()).collect();
    assert_eq!(seconds, [1, 2, 4, 8, 10, 10, 10]);
    assert_eq!(backoff(u32::MAX), MAX_RETRY);
}
