//! The images no build names: which tags are deletable and why the others are kept, over the
//! same hand-built clusters as the builds' tests. Every test also checks the one rule that
//! matters ([`never_needed`]): no deletable digest is named by a node, a build or a config in
//! any spelling, and no tag that stays holds it.

use super::*;
use crate::core::prune::images::{ImagePlan, TagKeep, plan_images, push_repositories};
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::{Listing, Resolved, TagAnswer};

const HOST: &str = "image-registry.openshift-image-registry.svc:5000";
const PATH: &str = "openshift-machine-config-operator/ocb-image";

/// `sha256:` and the hex of image `n` (as [`img`] makes it).
fn digest(n: u8) -> String {
    format!("sha256:{}", format!("{n:02x}").repeat(32))
}

pub(super) fn tag(tag: &str, n: u8) -> TagAnswer {
    TagAnswer {
        tag: tag.to_string(),
        resolved: Resolved::Available(digest(n)),
    }
}

/// The build tags of builds `ns` (each resolving to its image), and `extra`.
pub(super) fn tags_of(ns: &[u8], extra: Vec<TagAnswer>) -> Vec<TagAnswer> {
    ns.iter().map(|&n| tag(&name(n), n)).chain(extra).collect()
}

pub(super) fn listing(snapshot: &Snapshot, internal: Internal, tags: Vec<TagAnswer>) -> Listing {
    let source = push_repositories(snapshot)
        .into_iter()
        .find(|s| s.repository == REPO)
        .expect("the config's repository");
    Listing {
        source,
        internal,
        tags: Ok(tags),
    }
}

/// Plans `tags` of the fixture's repository (not the internal registry unless said).
fn images(c: &Cluster, tags: Vec<TagAnswer>) -> ImagePlan {
    images_in(c, Internal::No, tags)
}

fn images_in(c: &Cluster, internal: Internal, tags: Vec<TagAnswer>) -> ImagePlan {
    let snapshot = c.snapshot();
    let plan = plan_images(&snapshot, &[listing(&snapshot, internal, tags.clone())]);
    never_needed(&snapshot, &tags, &plan);
    plan
}

/// The deletable tags' names.
fn deletable_tags(plan: &ImagePlan) -> Vec<&str> {
    plan.tags
        .iter()
        .filter(|t| t.deletable())
        .map(|t| t.tag.as_str())
        .collect()
}

fn tag_reasons(plan: &ImagePlan, name: &str) -> Vec<TagKeep> {
    plan.tag(REPO, name)
        .unwrap_or_else(|| panic!("tag {name} listed: {plan:#?}"))
        .reasons()
}

/// The rule, checked independently of the plan's code: every string of every node, build and
/// config is searched for the deletable digests' hex, any case; every tag listed that is not
/// deletable holds none of them.
pub(super) fn never_needed(snapshot: &Snapshot, tags: &[TagAnswer], plan: &ImagePlan) {
    let mut texts: Vec<String> = Vec::new();
    for n in &snapshot.nodes {
        texts.extend(n.desired_image().map(str::to_string));
        texts.extend(n.current_image().map(str::to_string));
    }
    for b in &snapshot.machine_os_builds {
        texts.push(serde_json::to_string(b.as_ref()).expect("json"));
    }
    for c in &snapshot.machine_os_configs {
        texts.push(serde_json::to_string(c.as_ref()).expect("json"));
    }
    let texts = texts.join(" ").to_ascii_lowercase();
    for image in plan.deletable() {
        let hex = image.digest.split_once(':').expect("algorithm").1;
        assert!(
            !texts.contains(hex),
            "{} is deletable, but an object names it",
            image.image()
        );
        for t in tags {
            let holds = matches!(&t.resolved, Resolved::Available(d) if d.eq_ignore_ascii_case(&image.digest));
            assert!(
                !holds || image.tags.contains(&t.tag),
                "deleting {} deletes tag {}, which stays",
                image.image(),
                t.tag
            );
        }
    }
}

#[test]
fn a_tag_no_build_names_is_deletable_and_the_builds_tags_are_the_builds() {
    let c = Cluster::settled(3);
    let plan = images(&c, tags_of(&[1, 2, 3], vec![tag("stray", 0x50)]));
    assert_eq!(deletable_tags(&plan), ["stray"]);
    assert_eq!(
        plan.tags.len(),
        1,
        "the builds' tags are not listed: {plan:#?}"
    );
    let repo = &plan.repositories[0];
    assert_eq!((repo.tags, repo.build_tags), (4, 3));
    assert_eq!(repo.source.configs, ["worker"]);
    let images = plan.deletable();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].image(), format!("{REPO}@{}", digest(0x50)));
    assert_eq!(
        (
            images[0].source.host.as_str(),
            images[0].source.path.as_str()
        ),
        (HOST, PATH)
    );
}

#[test]
fn a_tag_holding_a_builds_image_under_another_name_is_the_builds() {
    let c = Cluster::settled(2);
    let plan = images(&c, tags_of(&[1, 2], vec![tag("release-candidate", 1)]));
    assert!(plan.tags.is_empty(), "{plan:#?}");
    assert_eq!(plan.repositories[0].build_tags, 3);
}

#[test]
fn a_digest_a_node_needs_is_kept_whoever_spells_it_how() {
    let leaked = digest(0x60);
    let hex = leaked.trim_start_matches("sha256:");
    let spellings = [
        format!("{REPO}@{leaked}"),
        format!("{REPO}:stray@{leaked}"),
        format!("{REPO}@sha256:{}", hex.to_uppercase()),
        format!("IMAGE-REGISTRY.openshift-image-registry.svc:5000/{PATH}@{leaked}"),
        format!("mirror.example.com/ocb/elsewhere@{leaked}"),
    ];
    for spelling in &spellings {
        for (desired, current, words) in [
            (
                Some(spelling.as_str()),
                Some(spelling.as_str()),
                "1 node runs it",
            ),
            (
                Some(spelling.as_str()),
                Some(&img(2) as &str),
                "1 node is updating to it",
            ),
            (None, Some(spelling.as_str()), "1 node runs it"),
        ] {
            let mut c = Cluster::settled(2);
            c.nodes.push(node("worker-c", "infra", desired, current));
            let plan = images(&c, tags_of(&[1, 2], vec![tag("stray", 0x60)]));
            assert_eq!(
                tag_reasons(&plan, "stray"),
                [TagKeep::NodeNeedsImage],
                "{spelling}"
            );
            let why = &plan.tag(REPO, "stray").expect("stray").why[0].text;
            assert!(why.starts_with(words) && why.ends_with("worker-c"), "{why}");
        }
    }
}

#[test]
fn what_a_config_names_is_kept() {
    // Its current image: no build carries it (a pre-built image's synthetic build deleted).
    let mut c = Cluster::settled(2);
    c.moscs[0]["status"]["currentImagePullSpec"] = json!(img(0x70));
    let plan = images(&c, tags_of(&[1, 2], vec![tag("prebuilt", 0x70)]));
    assert_eq!(tag_reasons(&plan, "prebuilt"), [TagKeep::ConfigImage]);

    // A pre-built image named by its annotation.
    let mut c = Cluster::settled(2);
    c.moscs[0]["metadata"]["annotations"]["machineconfiguration.openshift.io/pre-built-image"] =
        json!(img(0x71));
    let plan = images(&c, tags_of(&[1, 2], vec![tag("seed", 0x71)]));
    assert_eq!(tag_reasons(&plan, "seed"), [TagKeep::ConfigImage]);

    // Its push spec's tag, where an admin's pre-built image lives; and a tag on the same
    // digest goes with it.
    let c = Cluster::settled(2);
    let plan = images(
        &c,
        tags_of(
            &[1, 2],
            vec![tag("latest", 0x72), tag("copy", 0x72), tag("other", 0x73)],
        ),
    );
    assert_eq!(tag_reasons(&plan, "latest"), [TagKeep::ConfigTag]);
    assert_eq!(tag_reasons(&plan, "copy"), [TagKeep::SharesDigest]);
    assert_eq!(deletable_tags(&plan), ["other"]);
}

#[test]
fn a_digest_a_builds_tag_holds_is_kept_though_no_build_carries_it() {
    // Build 3 failed on a rebuild: its tag still holds the earlier same-name build's image,
    // which no build carries any more. A stray tag on that digest must not take it.
    let mut c = Cluster::settled(2);
    c.builds.push(failed(3, 60));
    let plan = images(
        &c,
        tags_of(
            &[1, 2],
            vec![tag(&name(3), 0x74), tag("stray", 0x74), tag("x", 0x75)],
        ),
    );
    assert_eq!(tag_reasons(&plan, "stray"), [TagKeep::SharesDigest]);
    assert!(
        plan.tag(REPO, "stray").expect("stray").why[0]
            .text
            .contains(&format!("MachineOSBuild {}", name(3))),
        "{plan:#?}"
    );
    assert_eq!(deletable_tags(&plan), ["x"]);
}

#[test]
fn could_not_tell_means_keep() {
    let c = Cluster::settled(2);
    let unknown = |t: &str| TagAnswer {
        tag: t.into(),
        resolved: Resolved::Unknown("HTTP 503".into()),
    };
    let gone = TagAnswer {
        tag: "gone".into(),
        resolved: Resolved::Missing("MANIFEST_UNKNOWN".into()),
    };
    let plan = images(
        &c,
        tags_of(
            &[1, 2],
            vec![unknown("odd"), gone.clone(), tag("stray", 0x50)],
        ),
    );
    assert_eq!(tag_reasons(&plan, "odd"), [TagKeep::DigestUnknown]);
    assert_eq!(
        tag_reasons(&plan, "gone"),
        [TagKeep::RepositoryUnclear, TagKeep::Gone]
    );
    assert_eq!(tag_reasons(&plan, "stray"), [TagKeep::RepositoryUnclear]);
    assert!(plan.deletable().is_empty());

    // A build's own tag that could not be told makes the rest unclear too.
    let plan = images(
        &c,
        vec![
            tag(&name(1), 1),
            unknown(&name(2)),
            tag("stray", 0x50),
            gone,
        ],
    );
    assert_eq!(tag_reasons(&plan, "stray"), [TagKeep::RepositoryUnclear]);
    assert_eq!(plan.repositories[0].build_tags, 2);

    // Not listed at all: said, and nothing planned.
    let snapshot = c.snapshot();
    let mut l = listing(&snapshot, Internal::No, vec![]);
    l.tags = Err("access denied: HTTP 401".into());
    let plan = plan_images(&snapshot, &[l]);
    assert!(plan.tags.is_empty());
    assert_eq!(
        plan.not_listed()
            .next()
            .and_then(|r| r.not_listed.as_deref()),
        Some("access denied: HTTP 401")
    );
}

#[test]
fn prune_does_not_delete_in_the_internal_registry() {
    let c = Cluster::settled(2);
    let plan = images_in(
        &c,
        Internal::Yes,
        tags_of(&[1, 2], vec![tag("stray", 0x50)]),
    );
    assert_eq!(tag_reasons(&plan, "stray"), [TagKeep::InternalRegistry]);
    let why = &plan.tag(REPO, "stray").expect("stray").why[0].text;
    assert!(
        why.contains(
            "oc delete imagestreamtag -n openshift-machine-config-operator ocb-image:stray"
        ),
        "{why}"
    );
    assert!(plan.deletable().is_empty());
}

#[test]
fn a_host_that_may_be_the_internal_registry_is_not_deleted_from() {
    let c = Cluster::settled(2);
    let unsure = Internal::Unknown("routes are forbidden".into());
    let plan = images_in(&c, unsure, tags_of(&[1, 2], vec![tag("stray", 0x50)]));
    assert_eq!(
        tag_reasons(&plan, "stray"),
        [TagKeep::InternalRegistryUnknown]
    );
    let why = &plan.tag(REPO, "stray").expect("stray").why[0].text;
    assert!(why.contains("routes are forbidden"), "{why}");
    assert!(plan.deletable().is_empty());
}

#[test]
fn one_delete_per_digest_with_every_tag_on_it() {
    let c = Cluster::settled(2);
    let plan = images(
        &c,
        tags_of(
            &[1, 2],
            vec![tag("a", 0x50), tag("b", 0x51), tag("c", 0x50)],
        ),
    );
    let images = plan.deletable();
    let got: Vec<(String, Vec<String>)> = images
        .iter()
        .map(|i| (i.digest.clone(), i.tags.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (digest(0x50), vec!["a".to_string(), "c".to_string()]),
            (digest(0x51), vec!["b".to_string()])
        ]
    );
}

#[test]
fn the_repositories_and_the_secrets_mco_uses() {
    let mut c = Cluster::settled(3);
    c.moscs[0]["spec"]["renderedImagePushSecret"] = json!({"name": "push-now"});
    // MCO deletes a build's image with the secret named on the build: the newest's counts.
    for (n, secret) in [(2, "push-older"), (3, "push-newest")] {
        c.build_mut(n)["metadata"]["annotations"] =
            json!({"machineconfiguration.openshift.io/rendered-image-push-secret": secret});
    }
    // Build 1 from before the config's push spec moved: another repository, its own secret.
    let old = "quay.example.com/ocb/old";
    let b = c.build_mut(1);
    b["spec"]["renderedImagePushSpec"] = json!(format!("{old}:{}", name(1)));
    b["metadata"]["annotations"] =
        json!({"machineconfiguration.openshift.io/rendered-image-push-secret": "push-then"});
    let snapshot = c.snapshot();
    let got: Vec<(String, Vec<String>, Option<String>)> = push_repositories(&snapshot)
        .into_iter()
        .map(|s| (s.repository, s.configs, s.secret))
        .collect();
    assert_eq!(
        got,
        [
            (
                REPO.to_string(),
                vec!["worker".to_string()],
                Some("push-newest".to_string())
            ),
            (old.to_string(), vec![], Some("push-then".to_string())),
        ]
    );
    // No build names one: the config's.
    for n in [2, 3] {
        c.build_mut(n)["metadata"]["annotations"] = json!({});
    }
    let snapshot = c.snapshot();
    assert_eq!(
        push_repositories(&snapshot)[0].secret.as_deref(),
        Some("push-now"),
        "{:?}",
        push_repositories(&snapshot)
    );
}

#[test]
fn images_in_words_and_json() {
    let mut c = Cluster::settled(2);
    c.moscs[0]["spec"]["renderedImagePushSecret"] = json!({"name": "push-secret"});
    c.nodes.push(on("worker-c", 0x60));
    let image_plan = images(
        &c,
        tags_of(&[1, 2], vec![tag("stray", 0x50), tag("leaked", 0x60)]),
    );
    let plan = c.plan(defaults());
    let text = words::text(&plan, &image_plan);
    assert!(
        text.contains(&format!(
            "Images no MachineOSBuild names: 1 of 2 tags can be deleted (with --apply --images), \
             in 1 repository.\n\nREPOSITORY {REPO} (MachineOSConfig worker; push secret \
             push-secret): 4 tags, 2 of them MachineOSBuilds'"
        )),
        "{text}"
    );
    assert!(
        text.contains("  DELETABLE :stray (.../ocb-image@sha256:505050505050...)\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  KEPT :leaked (.../ocb-image@sha256:606060606060...)\n    - 1 node runs it (currentImage): worker-c\n"
        ),
        "{text}"
    );
    let json = serde_json::to_value(Report::new(&plan, &image_plan, vec![])).expect("JSON");
    assert_eq!(
        json["images"],
        json!([
            {"repository": REPO, "tag": "stray", "digest": digest(0x50),
             "image": format!("{REPO}@{}", digest(0x50)), "deletable": true, "why": [], "reasons": []},
            {"repository": REPO, "tag": "leaked", "digest": digest(0x60),
             "image": format!("{REPO}@{}", digest(0x60)), "deletable": false,
             "why": ["1 node runs it (currentImage): worker-c"], "reasons": ["nodeNeedsImage"]}
        ])
    );
    assert_eq!(
        json["imageRepositories"],
        json!([{"repository": REPO, "machineOSConfigs": ["worker"], "pushSecret": "push-secret",
                "internalRegistry": false, "listed": true, "tags": 4, "buildTags": 2}])
    );

    let skipped = ImagePlan::skipped("a dump holds no push secret");
    assert!(
        words::text(&plan, &skipped).contains(
            "Images no MachineOSBuild names were not listed: a dump holds no push secret."
        )
    );
    let json = serde_json::to_value(Report::new(&plan, &skipped, vec![])).expect("JSON");
    assert_eq!(json["images"], json!([]));
    assert_eq!(
        json["warnings"],
        json!(["images no MachineOSBuild names were not listed: a dump holds no push secret"])
    );
}
