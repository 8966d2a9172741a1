//! The indexed verdict equals the full scan, over random clusters (pools, configs, builds, nodes).

use super::*;

fn config() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(POOLS),
        spec(),
        prop::option::of(prop::sample::select(
            &[
                "quay.io/x/ocb-image:latest",
                "ubuntu:latest",
                "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image:latest",
                "Not A Ref",
            ][..],
        )),
        prop::option::of(prop::sample::select(&["b0", "gone", ""][..])),
        prop::option::weighted(0.15, prop::sample::select(&["accepted risk", "", " "][..])),
    )
        .prop_map(|(name, current, rendered, build, override_reason)| {
            let mut annotations = serde_json::Map::new();
            if let Some(b) = build {
                annotations.insert(
                    "machineconfiguration.openshift.io/current-machine-os-build".into(),
                    json!(b),
                );
            }
            if let Some(r) = override_reason {
                annotations.insert(OVERRIDE_ANNOTATION.into(), json!(r));
            }
            json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "MachineOSConfig",
                "metadata": {"name": name, "uid": format!("uid-{name}"), "annotations": annotations},
                "spec": {"machineConfigPool": {"name": name}, "renderedImagePushSpec": rendered},
                "status": {"currentImagePullSpec": current}
            })
        })
}

fn build() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["worker", "infra", "custom", "nobody"][..]),
        // Labels as MCO writes them (both), only the config's, or none (spec only).
        prop::sample::select(&[2u8, 2, 2, 2, 2, 1, 0][..]),
        // A controller reference to its config, to a recreated config of the same name, a
        // plain owner reference, or none (an orphan).
        prop::sample::select(
            &[
                "controller",
                "controller",
                "controller",
                "controller",
                "recreated",
                "owner",
                "none",
            ][..],
        ),
        spec(),
        prop::option::weighted(0.1, prop::sample::select(&["accepted risk", ""][..])),
    )
        .prop_map(|(config, labels, owner, image, override_reason)| {
            let mut v = json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "MachineOSBuild",
                "metadata": {},
                "spec": {"machineOSConfig": {"name": config}},
                "status": {"digestedImagePushSpec": image}
            });
            v["metadata"]["labels"] = match labels {
                2 => json!({LABEL_MACHINE_OS_CONFIG: config, LABEL_TARGET_POOL: config}),
                1 => json!({LABEL_MACHINE_OS_CONFIG: config}),
                _ => json!({}),
            };
            let reference = |uid: String, controller: bool| {
                json!([{"apiVersion": format!("{GROUP}/v1"), "kind": "MachineOSConfig",
                        "name": config, "uid": uid, "controller": controller}])
            };
            v["metadata"]["ownerReferences"] = match owner {
                "controller" => reference(format!("uid-{config}"), true),
                "recreated" => reference(format!("uid-{config}-old"), true),
                "owner" => reference(format!("uid-{config}"), false),
                _ => json!([]),
            };
            if let Some(r) = override_reason {
                v["metadata"]["annotations"] = json!({OVERRIDE_ANNOTATION: r});
            }
            v
        })
}

fn pool() -> impl Strategy<Value = (Option<&'static str>, Option<bool>)> {
    (
        prop::option::of(prop::sample::select(&["True", "False", "true"][..])),
        prop::option::of(any::<bool>()),
    )
}

/// What to delete: a config or build of the snapshot, or a config as the request carries it
/// (its status may differ from the cache's).
#[derive(Clone, Debug)]
enum Target {
    Config(usize),
    Build(usize),
    Requested(Value),
}

#[derive(Clone, Debug)]
pub(super) struct World {
    nodes: Vec<NodeSpec>,
    /// Older versions of nodes (by index), filed in the index before the current ones.
    stale: Vec<(usize, NodeSpec)>,
    /// Nodes filed in the index and removed again.
    vanished: Vec<NodeSpec>,
    configs: Vec<Value>,
    pub(super) builds: Vec<Value>,
    pools: Vec<(Option<&'static str>, Option<bool>)>,
    target: Target,
    mode: PolicyMode,
}

pub(super) fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(node_spec(), 0..24),
        prop::collection::vec((0..24usize, node_spec()), 0..8),
        prop::collection::vec(node_spec(), 0..4),
        prop::collection::vec(config(), 1..4),
        prop::collection::vec(build(), 1..8),
        prop::collection::vec(pool(), POOLS.len()),
        prop_oneof![
            2 => (0..4usize).prop_map(Target::Config),
            2 => (0..8usize).prop_map(Target::Build),
            1 => config().prop_map(Target::Requested),
        ],
        prop::sample::select(&[PolicyMode::InFlight, PolicyMode::InUse][..]),
    )
        .prop_map(
            |(nodes, stale, vanished, configs, builds, pools, target, mode)| World {
                nodes,
                stale,
                vanished,
                configs,
                builds,
                pools,
                target,
                mode,
            },
        )
}

impl World {
    /// Every object, nodes included (what a full scan reads).
    pub(super) fn snapshot(&self) -> Snapshot {
        let mut builds: Vec<Arc<MachineOSBuild>> = Vec::new();
        for (i, b) in self.builds.iter().enumerate() {
            let mut b = b.clone();
            b["metadata"]["name"] = json!(format!("b{i}"));
            builds.push(parse(&b));
        }
        Snapshot {
            // One config per pool name, as MCO requires.
            machine_os_configs: self
                .configs
                .iter()
                .map(|c| (c["metadata"]["name"].to_string(), c))
                .collect::<BTreeMap<_, _>>()
                .values()
                .map(|c| parse(c))
                .collect(),
            machine_os_builds: builds,
            pools: POOLS
                .iter()
                .zip(&self.pools)
                .map(|(name, (updating, paused))| {
                    let conditions: Vec<Value> = updating
                        .iter()
                        .map(|s| json!({"type": "Updating", "status": s}))
                        .collect();
                    parse::<MachineConfigPool>(&json!({
                        "metadata": {"name": name},
                        "spec": {
                            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                            "paused": paused
                        },
                        "status": {"conditions": conditions, "machineCount": 3, "updatedMachineCount": 1}
                    }))
                })
                .collect(),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| Arc::new(node(&format!("node-{i}"), n)))
                .collect(),
            ..Default::default()
        }
    }

    /// The index as the node watch leaves it: stale versions and vanished nodes first.
    pub(super) fn index(&self) -> NodeIndex {
        let mut index = NodeIndex::default();
        for (i, n) in &self.stale {
            index.upsert(&node(&format!("node-{i}"), n));
        }
        for (i, n) in self.vanished.iter().enumerate() {
            index.upsert(&node(&format!("vanished-{i}"), n));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            index.upsert(&node(&format!("node-{i}"), n));
        }
        for i in 0..self.vanished.len() {
            index.remove(&format!("vanished-{i}"));
        }
        index
    }
}

#[test]
fn indexed_verdict_equals_full_scan() {
    let metrics = Arc::new(Metrics::default());
    let (blocked, allowed_with_images, indexed) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let n = cases("MOSC_GUARD_CASES_VERDICT", 1000);
    check("indexed_verdict_equals_full_scan", n, world(), |w| {
        let full = w.snapshot();
        let requested: Option<Arc<MachineOSConfig>> = match &w.target {
            Target::Requested(v) => Some(parse(v)),
            _ => None,
        };
        let target = match &w.target {
            Target::Config(i) => Deletion::MachineOSConfig(
                &full.machine_os_configs[i % full.machine_os_configs.len()],
            ),
            Target::Build(i) if !full.machine_os_builds.is_empty() => {
                Deletion::MachineOSBuild(&full.machine_os_builds[i % full.machine_os_builds.len()])
            }
            _ => Deletion::MachineOSConfig(
                requested.as_deref().unwrap_or(&full.machine_os_configs[0]),
            ),
        };
        let want = evaluate(&full, target, w.mode);
        if mosc_guard::core::policy::guarded_digests(&full, target).is_some() {
            indexed.fetch_add(1, Ordering::Relaxed);
        }
        // The webhook's view over the snapshot: nodes come from the digest index by name,
        // exactly as `cache::Caches` hands them to `Engine::cached`; a confirming read passes
        // the fence (the same objects and index).
        let (index, all) = (w.index(), full.nodes.clone());
        let by_name: HashMap<String, Arc<NodeMeta>> = full
            .nodes
            .iter()
            .map(|n| (n.name().to_string(), Arc::clone(n)))
            .collect();
        let view =
            ScriptedView::cached(full.clone()).nodes_from(move |digests, mode| match digests {
                Some(d) => index
                    .candidates(d, mode)
                    .iter()
                    .filter_map(|name| by_name.get(name.as_ref()).cloned())
                    .collect(),
                None => all.clone(),
            });
        let engine = Engine::new(view, w.mode, Arc::clone(&metrics), Duration::from_secs(5));
        let got = engine.cached(target);
        same_decision(&got, &want)?;
        // A confirmation whose node cache passed the fence decides the same way, from the
        // same index.
        let fresh = Fresh {
            objects: engine.view.objects(),
            nodes: FreshNodes::Cached,
            ..Fresh::default()
        };
        same_decision(&fresh.decide(&*engine.view, target, w.mode), &want)?;
        if want.blocked() {
            blocked.fetch_add(1, Ordering::Relaxed);
        } else if !want.images.is_empty() {
            allowed_with_images.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    // The generator must reach both verdicts, mostly through the index: otherwise the
    // property holds vacuously.
    let share = |c: &AtomicUsize| c.load(Ordering::Relaxed) as f64 / f64::from(n.max(1));
    println!(
        "  blocked {:.0}%, allowed with images {:.0}%, decided through the index {:.0}%",
        100.0 * share(&blocked),
        100.0 * share(&allowed_with_images),
        100.0 * share(&indexed)
    );
    assert!(share(&blocked) > 0.1, "too few blocked cases");
    assert!(share(&allowed_with_images) > 0.1, "too few allowed cases");
    assert!(share(&indexed) > 0.3, "too few cases through the index");
}

/// `got` decides as `want` (the full scan): equal when nothing blocks by itself; a denial may
/// be decided from the index's candidates (`evaluate_blocked`): the same decision and blocking
/// nodes, its pools among the full scan's, uncounted.
fn same_decision(
    got: &mosc_guard::core::policy::Verdict,
    want: &mosc_guard::core::policy::Verdict,
) -> Result<(), proptest::test_runner::TestCaseError> {
    if got.blocking.is_empty() {
        prop_assert_eq!(got, want);
        return Ok(());
    }
    for p in &got.rolling {
        prop_assert!(
            want.rolling.iter().any(|q| q.pool == p.pool
                && q.image == p.image
                && (p.pending_nodes.is_none() || p.pending_nodes == q.pending_nodes)),
            "{p:?} not among {:?}",
            want.rolling
        );
    }
    let strip = |v: &mosc_guard::core::policy::Verdict| mosc_guard::core::policy::Verdict {
        rolling: Vec::new(),
        ..v.clone()
    };
    prop_assert_eq!(strip(got), strip(want));
    Ok(())
}
