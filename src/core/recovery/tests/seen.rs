//! What `recover --apply`'s wait makes of what a cancelled node shows
//! ([`words::apply::seen`]): recovered, moved on, stopped (with its problem), or still waiting.

use super::*;
use crate::core::recovery::words::apply::{Seen, seen};

#[test]
fn each_progress_comes_to_one_answer_of_the_wait() {
    let target = (Some("rendered-worker-b".to_string()), None);
    let table = [
        (Progress::Recovered, "recovered", None),
        (
            Progress::MovedOn {
                desired_config: target.0.clone(),
                desired_image: target.1.clone(),
                degraded: false,
            },
            "movedOn",
            None,
        ),
        (
            Progress::MovedOn {
                desired_config: target.0.clone(),
                desired_image: target.1.clone(),
                degraded: true,
            },
            "movedOn",
            None,
        ),
        (
            Progress::Retargeted {
                desired_config: target.0.clone(),
                desired_image: target.1.clone(),
                state: "Degraded".to_string(),
            },
            "stopped",
            Some("retargeted"),
        ),
        (
            Progress::Rebooted {
                was: Some("a".to_string()),
                now: Some("b".to_string()),
            },
            "stopped",
            Some("rebooted"),
        ),
        (
            Progress::Waiting(vec!["state=Working (want Done)".to_string()]),
            "waiting",
            None,
        ),
    ];
    for (progress, want, problem) in table {
        let got = match seen(&progress) {
            Seen::Recovered(why) => {
                assert!(why.starts_with("recovered: Done"), "{why}");
                ("recovered", None)
            }
            Seen::MovedOn(why) => {
                assert!(why.contains("desiredConfig=rendered-worker-b, desiredImage=<none>"));
                ("movedOn", None)
            }
            Seen::Stop(stop) => {
                assert!(stop.why.ends_with("nothing more was written"), "{stop:?}");
                assert!(!stop.to_do.is_empty());
                ("stopped", Some(stop.problem))
            }
            Seen::Waiting(what) => {
                assert_eq!(what, "waiting for its daemon: state=Working (want Done)");
                ("waiting", None)
            }
        };
        assert_eq!(got, (want, problem), "{progress:?}");
    }
}

#[test]
fn a_wait_names_its_timeout_as_people_write_it() {
    use std::time::Duration;
    for (secs, words) in [(1200, "20m"), (90, "90s"), (60, "1m"), (30, "30s")] {
        assert_eq!(words::apply::minutes(Duration::from_secs(secs)), words);
    }
    let stop = words::apply::node_timed_out(Duration::from_secs(1200), "cordoned");
    assert_eq!(stop.problem, "timedOut");
    assert!(stop.why.starts_with("not done after 20m; still cordoned;"));
}
