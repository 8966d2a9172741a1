use super::*;

#[test]
fn the_open_files_limit_is_at_its_hard_limit() {
    let limit = raise_open_files_limit().expect("readable");
    assert!(limit >= 256, "{limit}");
    let (soft, _) = rlimit::Resource::NOFILE.get().expect("readable");
    assert_eq!(soft, limit, "the limit in force");
}
