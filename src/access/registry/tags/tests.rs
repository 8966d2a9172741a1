use super::*;

#[test]
fn next_pages_stay_on_the_host() {
    let h = "r.example:5000";
    assert_eq!(
        same_host(h, "/v2/x/tags/list?last=a").as_deref(),
        Some("/v2/x/tags/list?last=a")
    );
    assert_eq!(
        same_host(h, "https://R.example:5000/v2/x/tags/list?last=a").as_deref(),
        Some("/v2/x/tags/list?last=a")
    );
    assert_eq!(same_host(h, "https://evil.example/v2/x/tags/list"), None);
    assert_eq!(same_host(h, "http://r.example:5000/v2/x"), None);
    assert_eq!(same_host(h, "v2/x"), None);
}
