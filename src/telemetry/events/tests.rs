use super::*;

#[test]
fn notes_are_clipped_on_a_character_boundary() {
    assert_eq!(clip_to("short".into(), 10), "short");
    let long = "é".repeat(600); // 1200 bytes
    let clipped = clip_to(long, MAX_NOTE_BYTES);
    assert!(clipped.len() <= MAX_NOTE_BYTES);
    assert!(clipped.ends_with("..."));
}

/// What the API server checks for an Event's name (a DNS-1123 subdomain).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[test]
fn event_names_are_valid_for_any_valid_object_name() {
    let nanos = 1_780_000_000_123_456_789_i128;
    assert_eq!(event_name("worker", nanos), format!("worker.{nanos:x}"));
    // A 253-character MachineOSBuild name (the longest valid one), and cuts that would
    // end on '-' or '.'.
    let long = format!("worker-{}", "a".repeat(246));
    assert_eq!(long.len(), 253);
    let dashes = format!("{}-{}", "b".repeat(235), "c".repeat(17));
    let dots = format!("{}.{}", "d".repeat(235), "e".repeat(17));
    for object in [long.as_str(), &dashes, &dots, "x"] {
        assert!(is_dns_subdomain(object), "{object}");
        let name = event_name(object, nanos);
        assert!(is_dns_subdomain(&name), "{name} ({} chars)", name.len());
        assert!(name.ends_with(&format!(".{nanos:x}")), "{name}");
    }
    // Distinct instants give distinct names even when the object name was cut.
    assert_ne!(event_name(&long, nanos), event_name(&long, nanos + 1));
}

#[test]
fn references_name_the_kind_and_group() {
    let r = reference(TargetKind::MachineOSBuild, "worker-abc", Some("u-1"));
    assert_eq!(r.kind.as_deref(), Some("MachineOSBuild"));
    assert_eq!(
        r.api_version.as_deref(),
        Some("machineconfiguration.openshift.io/v1")
    );
    assert_eq!(r.uid.as_deref(), Some("u-1"));
    assert_eq!(r.namespace, None);
}
