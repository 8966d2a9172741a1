use super::*;

fn refusal() -> Answer {
    Answer {
        warnings: vec!["mosc-guard: decided with 4.20's rules".to_string()],
        blocking_nodes: 2,
        ..Answer::deny(Outcome::Denied, "line one\n\nline two".to_string())
    }
}

#[test]
fn warn_mode_admits_a_refusal_with_its_lines_as_warnings_and_keeps_its_words() {
    let a = refusal().not_enforced();
    assert!(a.allowed());
    assert_eq!(a.outcome, Outcome::WouldDeny);
    assert_eq!(a.message, "line one\n\nline two", "the Event's note");
    assert_eq!(a.warnings.len(), 4, "{:?}", a.warnings);
    assert_eq!(a.warnings[1], "mosc-guard: line one");
    assert_eq!(a.warnings[3], "mosc-guard: decided with 4.20's rules");
    assert_eq!(a.blocking_nodes, 2);
}

#[test]
fn mcos_request_is_admitted_and_an_allow_is_left_as_it_is() {
    let a = refusal().admitted_for_mco();
    assert!(a.allowed());
    assert_eq!(a.outcome, Outcome::McoWouldDeny);
    assert!(a.message.contains("line one"), "{}", a.message);
    assert!(
        a.message.starts_with("Admitted as the machine-config-operator's own request: mosc-guard never refuses those, because"),
        "one space between words: {}",
        a.message
    );
    let allow = Answer::allow(Outcome::Allowed, vec![]).admitted_for_mco();
    assert_eq!(allow.outcome, Outcome::Allowed);
    assert_eq!(
        Answer::allow(Outcome::Deferred, vec![])
            .not_enforced()
            .outcome,
        Outcome::Deferred
    );
}

#[test]
fn explain_extends_only_a_refusal() {
    assert_eq!(
        refusal().explain(" why").message,
        "line one\n\nline two why"
    );
    let allow = Answer::allow(Outcome::Allowed, vec![]).explain(" why");
    assert!(allow.message.is_empty());
}
