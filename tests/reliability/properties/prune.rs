//! The prune plan agrees with the webhook, over random clusters (verdict.rs's: nodes in every
//! spelling of a few images, configs, builds, pools), their builds aged, ended and pointed at
//! rendered configs at random: no build the plan calls deletable is refused by the policy in
//! either mode, none deletes an image a kept build carries or a config's current image; and
//! the plan `serve`'s gauge makes (each build's verdict from the digest index) deletes the same.

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::verdict::{World, world};
use super::*;
use mosc_guard::core::model::NameRef;
use mosc_guard::core::policy::{self, PolicyMode};
use mosc_guard::core::prune;

/// A world, each build's (age in minutes, state, rendered config), `--keep`, `--keep-younger-than`.
type Aged = (World, Vec<(i64, u8, u8)>, usize, u64);

fn aged() -> impl Strategy<Value = Aged> {
    (
        world(),
        prop::collection::vec((0..5000i64, 0..5u8, 0..3u8), 8),
        0..4usize,
        prop::sample::select(&[0u64, 3600][..]),
    )
}

fn rendered(config: &str, n: u8) -> String {
    format!("rendered-{config}-{n}")
}

/// The world's builds made as MCO writes them: a creation time, a tag of their own name, a
/// rendered config, an end (or none); its pools targeting config 1, their nodes on config 0.
fn snapshot(aged: &Aged, now: Timestamp) -> Snapshot {
    let (world, ages, _, _) = aged;
    let mut world = world.clone();
    for (i, b) in world.builds.iter_mut().enumerate() {
        let (minutes, state, config) = ages[i % ages.len()];
        let of = b["spec"]["machineOSConfig"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        b["metadata"]["creationTimestamp"] =
            json!((now - SignedDuration::from_mins(minutes)).to_string());
        b["spec"]["renderedImagePushSpec"] = json!(format!("{}:b{i}", REPOS[0]));
        b["spec"]["machineConfig"] = json!({"name": rendered(&of, config)});
        let condition = |t: &str| json!([{"type": t, "status": "True"}]);
        b["status"]["conditions"] = match state {
            0..=2 => condition("Succeeded"),
            3 => condition("Failed"),
            _ => json!([]),
        };
    }
    let mut snapshot = world.snapshot();
    for pool in &mut snapshot.pools {
        let pool = Arc::make_mut(pool);
        let name = pool.name().to_string();
        pool.spec.configuration = Some(NameRef {
            name: rendered(&name, 1),
        });
        pool.status.configuration = Some(NameRef {
            name: rendered(&name, 0),
        });
    }
    snapshot
}

#[test]
fn prune_plan_agrees_with_the_webhook() {
    let now: Timestamp = "2026-09-01T12:00:00Z".parse().expect("time");
    let (deletable, kept_by_policy) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let n = cases("MOSC_GUARD_CASES_PRUNE", 500);
    check("prune_plan_agrees_with_the_webhook", n, aged(), |aged| {
        let snapshot = snapshot(&aged, now);
        let (world, _, keep, young) = &aged;
        let options = prune::Options {
            keep: *keep,
            keep_younger_than: Duration::from_secs(*young),
        };
        let plan = prune::plan(&snapshot, &options, now);
        for p in plan.deletable() {
            let build = snapshot.machine_os_build(&p.name).expect("planned build");
            for mode in [PolicyMode::InFlight, PolicyMode::InUse] {
                let v = evaluate(&snapshot, Deletion::MachineOSBuild(build), mode);
                prop_assert!(
                    !v.blocked(),
                    "{} deletable, refused ({mode}): {v:?}",
                    p.name
                );
            }
            for image in &p.deletes {
                for k in plan.kept() {
                    prop_assert!(
                        !k.image
                            .iter()
                            .chain(&k.deletes)
                            .any(|i| same_image(i, image)),
                        "{} deletes {image}, which kept {} carries",
                        p.name,
                        k.name
                    );
                }
                for c in &snapshot.machine_os_configs {
                    prop_assert!(
                        !c.current_image().is_some_and(|i| same_image(i, image)),
                        "{} deletes {}'s current image",
                        p.name,
                        c.name()
                    );
                }
            }
        }
        // The gauge's plan: each verdict from the digest index, as `decision::gauges` asks.
        let index = world.index();
        let by_name: HashMap<String, Arc<NodeMeta>> = snapshot
            .nodes
            .iter()
            .map(|n| (n.name().to_string(), Arc::clone(n)))
            .collect();
        let mut objects = snapshot.clone();
        objects.nodes = Vec::new();
        let gauge = prune::plan_with(&snapshot, &options, now, |build| {
            policy::evaluate_indexed(
                &objects,
                Deletion::MachineOSBuild(build),
                PolicyMode::InUse,
                |digests| match digests {
                    Some(d) => index
                        .candidates(d, PolicyMode::InUse)
                        .iter()
                        .filter_map(|name| by_name.get(name.as_ref()).cloned())
                        .collect(),
                    None => snapshot.nodes.clone(),
                },
            )
        });
        let names =
            |p: &prune::Plan| -> Vec<String> { p.deletable().map(|b| b.name.clone()).collect() };
        prop_assert_eq!(names(&gauge), names(&plan));
        if plan.deletable().next().is_some() {
            deletable.fetch_add(1, Ordering::Relaxed);
        }
        let by_policy = plan.kept().any(|k| {
            k.reasons()
                .iter()
                .any(|r| matches!(r, prune::Keep::NodeNeedsImage | prune::Keep::PoolRollingOut))
        });
        if by_policy {
            kept_by_policy.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    // Both sides must be reached, or the property holds vacuously.
    let share = |c: &AtomicUsize| c.load(Ordering::Relaxed) as f64 / f64::from(n.max(1));
    println!(
        "  with a deletable build {:.0}%, with a build the policy keeps {:.0}%",
        100.0 * share(&deletable),
        100.0 * share(&kept_by_policy)
    );
    assert!(
        share(&deletable) > 0.2,
        "too few cases with a deletable build"
    );
    assert!(
        share(&kept_by_policy) > 0.2,
        "too few cases the policy keeps a build in"
    );
}
