use super::*;

impl Rules {
    /// The rules of one release, as if nothing else ran.
    pub(crate) fn for_version(version: Option<&str>) -> Rules {
        Rules::for_release(&ClusterRelease {
            desired: version.map(str::to_string),
            ..Default::default()
        })
    }
}

fn rules(v: &str) -> Rules {
    Rules::for_version(Some(v))
}

#[test]
fn release_4_19_cleans_up_by_label_and_serves_no_joining_machine() {
    let r = rules("4.19.14");
    assert_eq!(r.row_names(), ["4.19"]);
    assert_eq!(r.cleanup, Cleanup::ByLabel);
    assert!(!r.serves_joining_machines && !r.keeps_in_use_images && r.note().is_none());
}

#[test]
fn releases_4_20_to_4_22_clean_up_by_label_whatever_the_z_stream() {
    // The controller filter reached these branches mid-stream; an early z-stream deletes
    // by label, and no version string tells early from late.
    for (v, serves) in [
        ("4.20.0", false),
        ("4.20.8", false),
        ("4.20.19", false),
        ("4.21.0", true),
        ("4.21.3", true),
        ("4.21.14", true),
        ("4.22.0-rc.2", true),
        ("4.22.9", true),
    ] {
        let r = rules(v);
        assert_eq!(r.cleanup, Cleanup::ByLabel, "{v}");
        assert_eq!(r.serves_joining_machines, serves, "{v}");
        assert!(!r.keeps_in_use_images && !r.cautious(), "{v}");
        assert!(r.rows[0].cleanup_note.contains("PR #"), "{v}");
    }
}

#[test]
fn release_4_23_cleans_up_by_controller_and_keeps_in_use_images() {
    let r = rules("4.23.1");
    assert_eq!(r.row_names(), ["4.23"]);
    assert_eq!(r.cleanup, Cleanup::ByController);
    assert!(r.serves_joining_machines && r.keeps_in_use_images);
}

#[test]
fn unknown_or_newer_releases_get_the_cautious_rules_and_a_note() {
    for v in [
        None,
        Some("4.24.0"),
        Some("5.0.1"),
        Some("4.18.22"),
        Some("latest"),
        Some(""),
    ] {
        let r = Rules::for_version(v);
        assert!(r.cautious(), "{v:?}");
        assert_eq!(r.cleanup, Cleanup::ByLabel, "{v:?}");
        assert!(r.serves_joining_machines && !r.keeps_in_use_images, "{v:?}");
        assert!(
            r.note().is_some_and(|n| n.contains("most cautious")),
            "{v:?}"
        );
    }
    assert_eq!(
        rules("v4.21.3").row_names(),
        ["4.21"],
        "a leading v is read"
    );
    assert!(
        rules("4.24.0")
            .note()
            .is_some_and(|n| n.contains("4.24.0") && n.contains(&known_range())),
        "the note names the release and the known range"
    );
}

#[test]
fn the_known_range_follows_the_table() {
    let first = ROWS.first().map(|r| r.release).unwrap_or_default();
    let last = ROWS.last().map(|r| r.release).unwrap_or_default();
    assert_eq!(known_range(), format!("{first} to {last}"));
    assert!(
        ROWS.windows(2).all(|w| w[0].minor < w[1].minor),
        "oldest first"
    );
}

#[test]
fn an_upgrade_in_flight_decides_with_both_rows_the_cautious_way() {
    let upgrade = ClusterRelease {
        desired: Some("4.23.0".into()),
        also_running: vec!["4.22.4".into()],
        upgrading: true,
    };
    let r = Rules::for_release(&upgrade);
    assert_eq!(r.row_names(), ["4.22", "4.23"]);
    // 4.22's builder still runs: its cleanup by label; 4.22 keeps no in-use image.
    assert_eq!(r.cleanup, Cleanup::ByLabel);
    assert!(r.serves_joining_machines && !r.keeps_in_use_images);
    assert!(
        r.decided_by().contains("4.22 and 4.23") && r.decided_by().contains("4.22.4"),
        "{}",
        r.decided_by()
    );
    // 4.19 -> 4.20: neither serves joining machines; 4.23 -> 4.24: unknown, cautious.
    let r = Rules::for_release(&ClusterRelease {
        desired: Some("4.20.2".into()),
        also_running: vec!["4.19.9".into()],
        upgrading: true,
    });
    assert!(!r.serves_joining_machines && r.cleanup == Cleanup::ByLabel);
    let r = Rules::for_release(&ClusterRelease {
        desired: Some("4.24.0".into()),
        also_running: vec!["4.23.5".into()],
        upgrading: true,
    });
    assert!(r.cautious() && !r.keeps_in_use_images);
    assert!(
        r.note()
            .is_some_and(|n| n.contains("4.24.0") && !n.contains("4.23.5"))
    );
    // Once complete, 4.23 alone.
    let done = ClusterRelease {
        desired: Some("4.23.0".into()),
        ..Default::default()
    };
    assert_eq!(Rules::for_release(&done).cleanup, Cleanup::ByController);
}
