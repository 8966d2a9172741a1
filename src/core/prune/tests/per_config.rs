//! `serve`'s per-config gauge of deletable images ([`crate::core::prune::images::per_config`]),
//! checked against what prune lists as deletable for the same inputs.

use std::collections::{BTreeMap, BTreeSet};

use super::images::{listing, never_needed, tag, tags_of};
use super::*;
use crate::core::prune::images::{
    ConfigImages, ImagePlan, per_config, plan_images, push_repositories,
};
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::{Listing, Resolved, TagAnswer};

/// `serve`'s gauge over `listings` (with what `snapshot` names), checked against what prune
/// lists for the same inputs: per repository, the distinct digests of `images[]` entries
/// marked deletable; each config's count the sum over the repositories naming it in
/// `imageRepositories[]` (when every repository names its configs). Returns the gauge.
fn gauge(snapshot: &Snapshot, listings: &[Listing]) -> BTreeMap<String, ConfigImages> {
    let plan = plan_images(snapshot, listings);
    let tags: Vec<TagAnswer> = listings
        .iter()
        .flat_map(|l| l.tags.clone().unwrap_or_default())
        .collect();
    never_needed(snapshot, &tags, &plan);
    let gauge = per_config(snapshot, &plan);
    let (images, repositories) = plan.report();
    let images = serde_json::to_value(images).expect("JSON");
    let repositories = serde_json::to_value(repositories).expect("JSON");
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for image in images.as_array().expect("images[]") {
        if image["deletable"] == true {
            listed
                .entry(image["repository"].as_str().expect("repository").into())
                .or_default()
                .insert(
                    image["digest"]
                        .as_str()
                        .expect("a deletable tag's digest")
                        .into(),
                );
        }
    }
    let repositories = repositories.as_array().expect("imageRepositories[]");
    if repositories.iter().all(|r| {
        !r["machineOSConfigs"]
            .as_array()
            .expect("configs")
            .is_empty()
    }) {
        for (config, count) in &gauge {
            let mine = repositories.iter().filter(|r| {
                r["machineOSConfigs"]
                    .as_array()
                    .expect("configs")
                    .iter()
                    .any(|c| c == config.as_str())
            });
            let mut want = Some(0);
            for r in mine {
                let repo = r["repository"].as_str().expect("repository");
                let n = listed.get(repo).map_or(0, BTreeSet::len);
                want = want.filter(|_| r["listed"] == true).map(|w| w + n);
            }
            assert_eq!(count.count(), want, "{config}: {images:#}");
        }
    }
    // And the same count `--apply --images` deletes.
    let total: usize = plan.deletable().len();
    assert_eq!(total, listed.values().map(BTreeSet::len).sum::<usize>());
    gauge
}

fn counts(gauge: &BTreeMap<String, ConfigImages>) -> Vec<(&str, Option<usize>)> {
    gauge.iter().map(|(c, n)| (c.as_str(), n.count())).collect()
}

#[test]
fn the_gauge_counts_what_prune_lists_as_deletable() {
    let unknown = |t: &str| TagAnswer {
        tag: t.into(),
        resolved: Resolved::Unknown("HTTP 503".into()),
    };
    let gone = |t: &str| TagAnswer {
        tag: t.into(),
        resolved: Resolved::Missing("MANIFEST_UNKNOWN".into()),
    };
    let needed = {
        let mut c = Cluster::settled(3);
        c.nodes.push(on("worker-c", 0x60));
        c
    };
    let desired = {
        let mut c = Cluster::settled(3);
        c.nodes
            .push(node("worker-c", "infra", Some(&img(0x61)), Some(&img(3))));
        c
    };
    /// What, the cluster, the repository's tags besides the builds', internal, the gauge.
    type Case = (
        &'static str,
        Cluster,
        Vec<TagAnswer>,
        Internal,
        Option<usize>,
    );
    let table: Vec<Case> = vec![
        (
            "only the builds' tags",
            Cluster::settled(3),
            vec![],
            Internal::No,
            Some(0),
        ),
        (
            "a tag pushed by hand",
            Cluster::settled(3),
            vec![tag("stray", 0x50)],
            Internal::No,
            Some(1),
        ),
        (
            "a build's image under another tag",
            Cluster::settled(3),
            vec![tag("release", 2)],
            Internal::No,
            Some(0),
        ),
        (
            "three tags, two digests: two images",
            Cluster::settled(3),
            vec![tag("a", 0x50), tag("b", 0x51), tag("c", 0x50)],
            Internal::No,
            Some(2),
        ),
        (
            "a node runs one",
            needed,
            vec![tag("leaked", 0x60), tag("stray", 0x50)],
            Internal::No,
            Some(1),
        ),
        (
            "a node is updating to one",
            desired,
            vec![tag("next", 0x61), tag("stray", 0x50)],
            Internal::No,
            Some(1),
        ),
        (
            "the config's push spec tag and a copy of it",
            Cluster::settled(3),
            vec![tag("latest", 0x72), tag("copy", 0x72), tag("other", 0x73)],
            Internal::No,
            Some(1),
        ),
        (
            "a tag that could not be told keeps the repository",
            Cluster::settled(3),
            vec![unknown("odd"), tag("stray", 0x50)],
            Internal::No,
            Some(0),
        ),
        (
            "a tag gone meanwhile",
            Cluster::settled(3),
            vec![gone("gone"), tag("stray", 0x50)],
            Internal::No,
            Some(1),
        ),
        (
            "the internal registry: prune never deletes there",
            Cluster::settled(3),
            vec![tag("stray", 0x50)],
            Internal::Yes,
            Some(0),
        ),
    ];
    for (what, c, extra, internal, want) in table {
        let snapshot = c.snapshot();
        let l = listing(&snapshot, internal.clone(), tags_of(&[1, 2, 3], extra));
        assert_eq!(
            counts(&gauge(&snapshot, &[l])),
            [("worker", want)],
            "{what}"
        );
    }
}

#[test]
fn the_gauge_has_no_count_for_a_config_whose_repository_was_not_listed() {
    let c = Cluster::settled(2);
    let snapshot = c.snapshot();
    let mut l = listing(&snapshot, Internal::No, vec![]);
    l.tags = Err("access denied: HTTP 401".into());
    let g = gauge(&snapshot, &[l]);
    assert_eq!(
        g["worker"],
        ConfigImages::NotListed {
            repository: REPO.into(),
            why: "access denied: HTTP 401".into()
        }
    );
    // No pull configuration at all: every config, with the reason.
    let g = per_config(&snapshot, &ImagePlan::skipped("cannot read how nodes pull"));
    assert_eq!(
        g["worker"],
        ConfigImages::NotListed {
            repository: String::new(),
            why: "cannot read how nodes pull".into()
        }
    );
}

#[test]
fn the_gauge_counts_every_repository_of_a_config_under_each_config_there() {
    // Build 1 from before the config's push spec moved: another repository, counted under the
    // config its build names; a second config, infra, pushing to the same repository as worker.
    let old = "quay.example.com/ocb/old";
    let mut c = Cluster::settled(3);
    c.build_mut(1)["spec"]["renderedImagePushSpec"] = json!(format!("{old}:{}", name(1)));
    let mut infra = mosc(3);
    infra["metadata"]["name"] = json!("infra");
    infra["metadata"]["uid"] = json!("uid-infra");
    infra["spec"]["machineConfigPool"]["name"] = json!("infra");
    infra["spec"]["renderedImagePushSpec"] = json!(format!("{REPO}:infra"));
    c.moscs.push(infra);
    let snapshot = c.snapshot();
    let sources = push_repositories(&snapshot);
    let source = |repository: &str| {
        sources
            .iter()
            .find(|s| s.repository == repository)
            .expect("the repository")
            .clone()
    };
    let main = Listing {
        source: source(REPO),
        internal: Internal::No,
        tags: Ok(tags_of(&[2, 3], vec![tag("stray", 0x50)])),
    };
    let moved = |tags: Result<Vec<TagAnswer>, String>| Listing {
        source: source(old),
        internal: Internal::No,
        tags,
    };
    let listed = moved(Ok(vec![
        tag(&name(1), 1),
        tag("left-behind", 0x51),
        tag("other", 0x52),
    ]));
    let g = gauge(&snapshot, &[main.clone(), listed]);
    assert_eq!(counts(&g), [("infra", Some(1)), ("worker", Some(3))]);

    // The old repository could not be listed: worker has no count, infra (not there) has.
    let g = gauge(&snapshot, &[main, moved(Err("HTTP 503".into()))]);
    assert_eq!(counts(&g), [("infra", Some(1)), ("worker", None)]);
    assert!(
        matches!(&g["worker"], ConfigImages::NotListed { repository, .. } if repository == old)
    );
}
