//! What MCO's node controller sends a pool's nodes (`getConfigAndBuild`, `canLayeredContinue`,
//! node_controller.go, per release): the pool's rendered config and, while its MOSC exists, the
//! MOSC's image once the build for the pool's `spec.configuration` has Succeeded with it
//! ([`pool_target`]); which build that is, release by release ([`pool_build`]). The node
//! controller ([`super::nodes`]) and the pool status ([`super::pools`]) read it.

use kube::api::DynamicObject;

use super::node_state::Target;
use crate::mco::{self, CURRENT_MOSB, str_at};
use crate::release::Release;

/// The target of a pool: its rendered config, and while its MOSC exists (even with a
/// deletionTimestamp) the MOSC's image, while `canLayeredContinue` holds: the pool's build
/// ([`pool_build`]) Succeeded and its digested image is the MOSC's `currentImagePullSpec`.
/// `None` (nodes wait) otherwise.
pub(super) fn pool_target(
    release: Release,
    pool: &DynamicObject,
    moscs: &[DynamicObject],
    mosbs: &[DynamicObject],
    turn: usize,
) -> Option<Target> {
    let config = mco::pool_target_config(pool);
    let Some(mosc) = pool_mosc(pool, moscs) else {
        return Some(Target {
            config,
            image: None,
        });
    };
    let image = str_at(&mosc.data, &["status", "currentImagePullSpec"])?;
    pool_build(release, pool, mosc, mosbs, turn)
        .build
        .filter(|b| mco::condition_true(b, "Succeeded"))
        .filter(|b| str_at(&b.data, &["status", "digestedImagePushSpec"]) == Some(image))?;
    Some(Target {
        config,
        image: Some(image.to_owned()),
    })
}

/// The pool's build as `getConfigAndBuild` finds it, and an annotation to clear.
pub(super) struct PoolBuild<'a> {
    pub build: Option<&'a DynamicObject>,
    /// 4.22 on: the MOSC's current-build annotation names a build that is gone or for another
    /// config; the node controller removes it.
    pub stale_annotation: Option<&'a str>,
}

/// `getConfigAndBuild` of `release`'s node controller: from 4.21, the build the MOSC's
/// `current-machine-os-build` annotation names if it is for the pool's `spec.configuration`;
/// otherwise (and before 4.21 always) the first MOSB whose `spec.machineOSConfig` is the MOSC
/// and `spec.machineConfig` the pool's `spec.configuration`, whatever its name, uid, state or
/// deletion. "First" is MCO's lister order, which is a Go map's: none, and another on every
/// pass. That matters while several builds for one config exist (a Containerfile changed: the
/// old build stays, succeeded): a pass may find the old one and wait, a later one the current
/// one and go on. So pass `turn` finds the `turn`-th of them (in the API's order, by name).
pub(super) fn pool_build<'a>(
    release: Release,
    pool: &DynamicObject,
    mosc: &'a DynamicObject,
    mosbs: &'a [DynamicObject],
    turn: usize,
) -> PoolBuild<'a> {
    let config = mco::pool_target_config(pool);
    let mosc_name = mosc.metadata.name.as_deref().unwrap_or_default();
    let row = release.row();
    let mut stale_annotation = None;
    let annotated = mosc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CURRENT_MOSB))
        .map(String::as_str);
    if let Some(current) = annotated.filter(|_| row.node_controller_prefers_annotated_build) {
        match mosbs
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(current))
        {
            Some(b) if str_at(&b.data, &["spec", "machineConfig", "name"]) == Some(&config) => {
                return PoolBuild {
                    build: Some(b),
                    stale_annotation: None,
                };
            }
            _ if row.node_controller_clears_stale_annotation => stale_annotation = Some(current),
            _ => {}
        }
    }
    let matching: Vec<&DynamicObject> = mosbs
        .iter()
        .filter(|b| {
            str_at(&b.data, &["spec", "machineOSConfig", "name"]) == Some(mosc_name)
                && str_at(&b.data, &["spec", "machineConfig", "name"]) == Some(config.as_str())
        })
        .collect();
    let build = (!matching.is_empty()).then(|| matching[turn % matching.len()]);
    PoolBuild {
        build,
        stale_annotation,
    }
}

/// The MOSC that opts the pool into image mode, if any.
pub(super) fn pool_mosc<'a>(
    pool: &DynamicObject,
    moscs: &'a [DynamicObject],
) -> Option<&'a DynamicObject> {
    let name = pool.metadata.name.as_deref()?;
    moscs
        .iter()
        .find(|m| str_at(&m.data, &["spec", "machineConfigPool", "name"]) == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    use crate::release::TABLE;

    fn object(name: &str, data: Value, annotations: &[(&str, &str)]) -> DynamicObject {
        let mut o = DynamicObject::new(name, &mco::mosb_resource()).data(data);
        o.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        o
    }

    fn build(name: &str, config: &str, succeeded: bool, image: &str) -> DynamicObject {
        let status = if succeeded { "True" } else { "False" };
        object(
            name,
            json!({"spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": config}},
                   "status": {"digestedImagePushSpec": image,
                              "conditions": [{"type": "Succeeded", "status": status}]}}),
            &[],
        )
    }

    const OLD: &str = "127.0.0.1:5000/ocb-image@sha256:aaaa";
    const NEW: &str = "127.0.0.1:5000/ocb-image@sha256:bbbb";

    /// The pool moved to R2 while the MOSC still points at R1's image: each row's node
    /// controller stops the rollout while R2's build runs, whatever the MOSC's annotation says,
    /// and sends nodes to R2's image once it succeeded and the MOSC points at it.
    #[test]
    fn each_row_sends_nodes_only_to_a_succeeded_build_of_the_pools_config() {
        let pool = object(
            "worker",
            json!({"spec": {"configuration": {"name": "rendered-worker-r2"}}}),
            &[],
        );
        for row in TABLE {
            let r = row.release;
            let mosc = |current: &str, image: &str| {
                object(
                    "worker",
                    json!({"spec": {"machineConfigPool": {"name": "worker"}},
                           "status": {"currentImagePullSpec": image}}),
                    &[(CURRENT_MOSB, current)],
                )
            };
            let running = [
                build("worker-a", "rendered-worker-r1", true, OLD),
                build("worker-b", "rendered-worker-r2", false, ""),
            ];
            // 4.19/4.20 name the running build at its start; either way nodes wait.
            for annotated in ["worker-a", "worker-b"] {
                let moscs = [mosc(annotated, OLD)];
                assert!(
                    pool_target(r, &pool, &moscs, &running, 0).is_none(),
                    "{r:?}"
                );
            }
            let done = [
                build("worker-a", "rendered-worker-r1", true, OLD),
                build("worker-b", "rendered-worker-r2", true, NEW),
            ];
            let moscs = [mosc("worker-b", NEW)];
            let target = pool_target(r, &pool, &moscs, &done, 0).expect("rolls out");
            assert_eq!(target.image.as_deref(), Some(NEW), "{r:?}");
            // Succeeded, but the MOSC not pointed at it yet: wait.
            assert!(pool_target(r, &pool, &[mosc("worker-b", OLD)], &done, 0).is_none());
            // An annotation naming R1's build is stale from 4.22 on.
            let stale = pool_build(r, &pool, &moscs[0], &running, 0).stale_annotation;
            assert_eq!(stale, None, "{r:?}: the annotated build is for R2");
            let old_moscs = [mosc("worker-a", OLD)];
            let stale = pool_build(r, &pool, &old_moscs[0], &running, 0).stale_annotation;
            assert_eq!(
                stale.is_some(),
                row.node_controller_clears_stale_annotation,
                "{r:?}"
            );
        }
    }

    /// Two builds for the pool's config (a failed one and its fix): 4.21 on the annotated one
    /// counts; before, the first of them.
    #[test]
    fn the_annotated_build_counts_from_4_21() {
        let pool = object(
            "worker",
            json!({"spec": {"configuration": {"name": "rendered-worker-r2"}}}),
            &[],
        );
        let builds = [
            build("worker-b", "rendered-worker-r2", false, ""),
            build("worker-c", "rendered-worker-r2", true, NEW),
        ];
        let mosc = object(
            "worker",
            json!({"spec": {"machineConfigPool": {"name": "worker"}},
                   "status": {"currentImagePullSpec": NEW}}),
            &[(CURRENT_MOSB, "worker-c")],
        );
        for row in TABLE {
            let found = pool_build(row.release, &pool, &mosc, &builds, 0).build;
            let name = found.and_then(|b| b.metadata.name.as_deref());
            let expected = if row.node_controller_prefers_annotated_build {
                "worker-c"
            } else {
                "worker-b"
            };
            assert_eq!(name, Some(expected), "{:?}", row.release);
        }
    }

    /// Two succeeded builds for the pool's config (the Containerfile changed): MCO's lister
    /// order changes from pass to pass, so before 4.21 some pass finds the current one and the
    /// rollout goes on; a fixed order could wait for ever on the old one.
    #[test]
    fn a_later_pass_finds_the_current_build_among_several_for_one_config() {
        let pool = object(
            "worker",
            json!({"spec": {"configuration": {"name": "rendered-worker-r2"}}}),
            &[],
        );
        let builds = [
            build("worker-a", "rendered-worker-r2", true, OLD),
            build("worker-c", "rendered-worker-r2", true, NEW),
        ];
        let moscs = [object(
            "worker",
            json!({"spec": {"machineConfigPool": {"name": "worker"}},
                   "status": {"currentImagePullSpec": NEW}}),
            &[],
        )];
        let found: Vec<bool> = (0..2)
            .map(|turn| pool_target(Release::V4_20, &pool, &moscs, &builds, turn).is_some())
            .collect();
        assert_eq!(found, [false, true], "one pass waits, the next goes on");
    }
}
