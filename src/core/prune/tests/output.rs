//! The plan in words and as JSON.

use super::*;
use crate::core::prune::images::ImagePlan;

#[test]
fn the_text_lists_every_build_with_what_deleting_it_does_or_why_it_is_kept() {
    let mut c = Cluster::settled(4);
    c.builds.push(failed(9, 3 * 24 * 60));
    let text = words::text(&c.plan(defaults()), &ImagePlan::default());
    assert!(
        text.starts_with(
            "2 of 5 MachineOSBuilds can be deleted (--keep 3, --keep-younger-than 1h)."
        ),
        "{text}"
    );
    assert!(text.contains(&format!("\nDELETABLE {} (MachineOSConfig worker, Succeeded, 4d old)\n  deleting it makes MCO delete .../ocb-image@sha256:010101010101... from the registry (by its tag {REPO}:{})", name(1), name(1))), "{text}");
    assert!(text.contains(&format!("\nDELETABLE {} (MachineOSConfig worker, Failed, 3d old)\n  deleting it removes no image from the registry (it pushed none)", name(9))), "{text}");
    assert!(text.contains(&format!("\nKEPT {} (MachineOSConfig worker, Succeeded, 1d old)\n  - 2 nodes run its image: worker-a, worker-b\n  - MachineOSConfig worker names it", name(4))), "{text}");
    assert!(
        text.contains("No MachineOSConfig or MachineOSBuild names a repository"),
        "{text}"
    );
    assert!(
        text.ends_with("Decided with the rules of OpenShift 4.20 (the cluster runs 4.20.8).\n"),
        "{text}"
    );
    assert_eq!(
        words::text(
            &Cluster {
                builds: Vec::new(),
                ..Cluster::settled(1)
            }
            .plan(defaults()),
            &ImagePlan::default()
        )
        .lines()
        .next(),
        Some("No MachineOSBuild: nothing to prune.")
    );
}

#[test]
fn the_json_puts_every_build_in_deletable_or_kept_with_its_reasons() {
    let c = Cluster::settled(4);
    let plan = c.plan(defaults());
    let json = serde_json::to_value(Report::new(
        &plan,
        &ImagePlan::default(),
        vec!["a note".into()],
    ))
    .expect("JSON");
    assert_eq!(json["deletable"].as_array().map(Vec::len), Some(1));
    let gone = &json["deletable"][0];
    assert_eq!(gone["build"], name(1).as_str());
    assert_eq!(gone["machineOSConfig"], "worker");
    assert_eq!(gone["state"], "Succeeded");
    assert_eq!(gone["ageSeconds"], 4 * 24 * 3600);
    assert_eq!(gone["deletes"], json!([img(1)]));
    assert_eq!(gone["tag"], format!("{REPO}:{}", name(1)).as_str());
    assert!(gone.get("why").is_none());
    let kept = &json["kept"][2];
    assert_eq!(kept["build"], name(4).as_str());
    assert_eq!(
        kept["reasons"],
        json!([
            "nodeNeedsImage",
            "currentBuild",
            "poolConfiguration",
            "newest"
        ])
    );
    assert_eq!(kept["why"].as_array().map(Vec::len), Some(6), "{kept:#}");
    assert_eq!(json["images"], json!([]));
    assert_eq!(json["keep"], 3);
    assert_eq!(json["keepYoungerThanSeconds"], 3600);
    assert_eq!(json["release"]["rules"], json!(["4.20"]));
    assert_eq!(json["warnings"], json!(["a note"]));
}

#[test]
fn durations_read_as_people_write_them() {
    use std::time::Duration;
    for (secs, text) in [
        (0, "0s"),
        (45, "45s"),
        (60, "1m"),
        (3600, "1h"),
        (5400, "1h30m"),
        (90_061, "1d1h"),
        (3 * 86_400 + 59, "3d"),
    ] {
        assert_eq!(words::duration(Duration::from_secs(secs)), text, "{secs}");
    }
}
