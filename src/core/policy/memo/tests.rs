use super::*;

#[test]
fn keys_are_equal_by_text_whether_or_not_they_share_an_allocation() {
    let (a, b) = (
        String::from("quay.io/x@sha256:aa"),
        String::from("quay.io/x@sha256:aa"),
    );
    assert_ne!(a.as_ptr(), b.as_ptr(), "two allocations");
    assert!(Text(Some(&a)) == Text(Some(&b)));
    assert!(Text(Some(&a)) == Text(Some(&a)));
    assert!(Text(Some(&a[..5])) != Text(Some(&a)));
    assert!(Text(None) == Text(None));
    assert!(Text(Some("")) != Text(None));
    let mut memo = Memo::default();
    let mut computed = 0;
    for key in [&a, &b, &a] {
        memo.get_or(Text(Some(key)), || {
            computed += 1;
            key.len()
        });
    }
    assert_eq!(computed, 1, "equal text is one entry");
}
