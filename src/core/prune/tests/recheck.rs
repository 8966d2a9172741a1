//! What `prune --apply` re-checks right before each delete: a build, re-planned
//! ([`crate::core::prune::recheck`]), and a digest, its repository listed again
//! ([`crate::core::prune::images::relisted`]): still the same, gone, or changed with every reason.

use super::*;
use crate::core::prune::images::{
    DeletableImage, Relisted, plan_images, push_repositories, relisted,
};
use crate::core::registry::internal::Internal;
use crate::core::registry::listing::{Listing, Resolved, TagAnswer};

/// Tags by name and the image each holds.
type Tags = &'static [(&'static str, u8)];

fn tag(tag: &str, n: u8) -> TagAnswer {
    TagAnswer {
        tag: tag.to_string(),
        resolved: Resolved::Available(format!("sha256:{}", format!("{n:02x}").repeat(32))),
    }
}

/// The repository of `c`'s config listed with the tags of builds 1 and 2 and `extra`.
fn listed(c: &Cluster, extra: &[(&str, u8)]) -> Listing {
    let source = push_repositories(&c.snapshot())
        .into_iter()
        .find(|s| s.repository == REPO)
        .expect("the config's repository");
    let builds = [1, 2].map(|n| tag(&name(n), n));
    let extra = extra.iter().map(|&(t, n)| tag(t, n));
    Listing {
        source,
        internal: Internal::No,
        tags: Ok(builds.into_iter().chain(extra).collect()),
    }
}

/// The one image planned for deletion in two builds' cluster with `extra` tags.
fn planned(extra: &[(&str, u8)]) -> DeletableImage {
    let c = Cluster::settled(2);
    let plan = plan_images(&c.snapshot(), &[listed(&c, extra)]);
    let mut deletable = plan.deletable();
    assert_eq!(deletable.len(), 1, "{plan:#?}");
    deletable.remove(0)
}

#[test]
fn a_relisted_digest_is_deleted_only_while_it_is_the_same() {
    let worker_c_runs_it = {
        let mut c = Cluster::settled(2);
        c.nodes.push(on("worker-c", 0x50));
        c
    };
    let build_3_has_it = {
        let mut c = Cluster::settled(2);
        let mut b = build(3, 60);
        b["status"]["digestedImagePushSpec"] = json!(img(0x50));
        c.builds.push(b);
        c
    };
    let nothing = Cluster::settled;
    let table: [(&str, Tags, Tags, Cluster, Relisted); 7] = [
        (
            "unchanged",
            &[("stray", 0x50)],
            &[("stray", 0x50)],
            nothing(2),
            Relisted::Same,
        ),
        (
            "unchanged, two tags in another order",
            &[("b", 0x50), ("a", 0x50)],
            &[("a", 0x50), ("b", 0x50)],
            nothing(2),
            Relisted::Same,
        ),
        (
            "no tag holds it",
            &[("stray", 0x50)],
            &[("stray", 0x51)],
            nothing(2),
            Relisted::Gone,
        ),
        (
            "a node runs it now",
            &[("stray", 0x50)],
            &[("stray", 0x50)],
            worker_c_runs_it,
            Relisted::Changed(vec![
                "tag stray: 1 node runs it (currentImage): worker-c".into(),
            ]),
        ),
        (
            "another tag holds it too",
            &[("stray", 0x50)],
            &[("stray", 0x50), ("copy", 0x50)],
            nothing(2),
            Relisted::Changed(vec!["tag copy holds it now too".into()]),
        ),
        (
            "a planned tag moved",
            &[("a", 0x50), ("b", 0x50)],
            &[("a", 0x50), ("b", 0x51)],
            nothing(2),
            Relisted::Changed(vec!["tag b no longer holds it".into()]),
        ),
        (
            "a build carries it now",
            &[("stray", 0x50)],
            &[("stray", 0x50)],
            build_3_has_it,
            Relisted::Changed(vec!["tag stray now belongs to a MachineOSBuild".into()]),
        ),
    ];
    for (case, before, after, c, want) in table {
        let image = planned(before);
        let got = relisted(&image, &c.snapshot(), &listed(&c, after));
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn a_repository_that_cannot_be_listed_again_is_not_deleted_from() {
    let image = planned(&[("stray", 0x50)]);
    let c = Cluster::settled(2);
    let mut listing = listed(&c, &[]);
    listing.tags = Err("HTTP 503".into());
    let got = relisted(&image, &c.snapshot(), &listing);
    assert_eq!(got, Relisted::NotListed("HTTP 503".into()));
    assert_eq!(
        got.why(),
        "could not list its repository again (HTTP 503): not deleted"
    );
}

#[test]
fn each_answer_in_one_sentence() {
    for (relisted, why) in [
        (
            Relisted::Gone,
            "no tag holds it any more: nothing to delete",
        ),
        (
            Relisted::Changed(Vec::new()),
            "changed since the plan, so not deleted: the fresh plan differs",
        ),
        (
            Relisted::Changed(vec!["tag a holds it now too".into(), "tag b x".into()]),
            "changed since the plan, so not deleted: tag a holds it now too; tag b x",
        ),
    ] {
        assert_eq!(relisted.why(), why);
    }
}

#[test]
fn a_replanned_build_is_deleted_only_while_deletable_and_only_as_read() {
    let c = Cluster::settled(5);
    let plan = c.plan(defaults());
    let old = name(1);
    match recheck(&plan, &old) {
        Recheck::Deletable { uid, version, .. } => {
            assert_eq!((uid, version), (format!("uid-{old}").as_str(), "7"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        recheck(&plan, "worker-gone"),
        Recheck::Gone("gone when re-read: nothing to delete".into())
    );
    let Recheck::Changed(why) = recheck(&plan, &name(5)) else {
        panic!("the current build is kept");
    };
    assert!(
        why.starts_with("changed since the plan, so not deleted: the fresh plan keeps it: "),
        "{why}"
    );

    let mut c = Cluster::settled(5);
    c.build_mut(1)["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    let plan = c.plan(defaults());
    assert_eq!(
        recheck(&plan, &old),
        Recheck::Changed(
            "the re-read build has no uid or resourceVersion to make its delete conditional on; \
             nothing was deleted"
                .into()
        )
    );
}
