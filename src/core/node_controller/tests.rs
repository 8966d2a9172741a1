use serde_json::{Value, json};

use super::*;

const R1: &str = "rendered-worker-1";
const R2: &str = "rendered-worker-2";
const OLD: &str = "registry.example.com/ocb@sha256:aaaa";
const NEW: &str = "registry.example.com/ocb@sha256:bbbb";

fn pool(paused: bool, config: Option<&str>) -> MachineConfigPool {
    let mut spec = json!({"paused": paused});
    if let Some(c) = config {
        spec["configuration"] = json!({"name": c});
    }
    serde_json::from_value(json!({"metadata": {"name": "worker"}, "spec": spec})).expect("pool")
}

fn mosc(image: Option<&str>) -> Arc<MachineOSConfig> {
    let mut status = json!({});
    if let Some(i) = image {
        status["currentImagePullSpec"] = json!(i);
    }
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}}, "status": status}))
        .expect("mosc"),
    )
}

fn build(name: &str, config: &str, condition: Option<&str>, image: &str) -> Arc<MachineOSBuild> {
    let conditions: Vec<Value> = condition
        .map(|c| json!({"type": c, "status": "True"}))
        .into_iter()
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": config}},
            "status": {"digestedImagePushSpec": image, "conditions": conditions}}))
        .expect("build"),
    )
}

/// What, the pool, its configs and builds, what the node controller sends.
type Row = (
    &'static str,
    MachineConfigPool,
    Vec<Arc<MachineOSConfig>>,
    Vec<Arc<MachineOSBuild>>,
    PoolTarget<'static>,
);

/// One row per case `syncMachineConfigPool` tells apart.
#[test]
fn what_the_node_controller_sends() {
    let waiting = |build| PoolTarget::Waiting {
        config: "worker",
        build,
    };
    let rows: Vec<Row> = vec![
        (
            "no config: the pool's configuration, no image",
            pool(false, Some(R2)),
            vec![],
            vec![],
            PoolTarget::Sends {
                config: R2,
                image: None,
            },
        ),
        (
            "paused",
            pool(true, Some(R2)),
            vec![],
            vec![],
            PoolTarget::Paused,
        ),
        (
            "configuration unknown",
            pool(false, None),
            vec![mosc(Some(NEW))],
            vec![],
            PoolTarget::Unknown,
        ),
        (
            "layered, its build current",
            pool(false, Some(R2)),
            vec![mosc(Some(NEW))],
            vec![build("b", R2, Some("Succeeded"), NEW)],
            PoolTarget::Sends {
                config: R2,
                image: Some(NEW),
            },
        ),
        (
            "layered, no build for the configuration (a recreated config waiting)",
            pool(false, Some(R2)),
            vec![mosc(Some(OLD))],
            vec![build("a", R1, Some("Succeeded"), OLD)],
            waiting(PoolBuild::Missing),
        ),
        (
            "layered, its build running",
            pool(false, Some(R2)),
            vec![mosc(Some(OLD))],
            vec![build("b", R2, None, "")],
            waiting(PoolBuild::Running("b".into())),
        ),
        (
            "layered, its build failed",
            pool(false, Some(R2)),
            vec![mosc(Some(OLD))],
            vec![build("b", R2, Some("Failed"), "")],
            waiting(PoolBuild::Failed("b".into())),
        ),
        (
            "layered, succeeded but the config not pointed at it yet",
            pool(false, Some(R2)),
            vec![mosc(Some(OLD))],
            vec![build("b", R2, Some("Succeeded"), NEW)],
            waiting(PoolBuild::Succeeded {
                build: "b".into(),
                current: false,
            }),
        ),
        (
            "layered, the config has no image",
            pool(false, Some(R2)),
            vec![mosc(None)],
            vec![build("b", R2, Some("Succeeded"), NEW)],
            waiting(PoolBuild::Succeeded {
                build: "b".into(),
                current: false,
            }),
        ),
        (
            "a failed build and its fix: the fix counts",
            pool(false, Some(R2)),
            vec![mosc(Some(NEW))],
            vec![
                build("b", R2, Some("Failed"), ""),
                build("c", R2, Some("Succeeded"), NEW),
            ],
            PoolTarget::Sends {
                config: R2,
                image: Some(NEW),
            },
        ),
    ];
    for (what, pool, configs, builds, want) in rows {
        assert_eq!(pool_target(&pool, &configs, &builds), want, "{what}");
    }
}

#[test]
fn can_layered_continue_only_with_the_current_build_of_the_configuration() {
    let configs = [mosc(Some(NEW))];
    let done = [build("b", R2, Some("Succeeded"), NEW)];
    assert_eq!(
        can_layered_continue(&pool(false, Some(R2)), &configs[0], &done),
        Some(true)
    );
    assert_eq!(
        can_layered_continue(&pool(false, Some(R1)), &configs[0], &done),
        Some(false)
    );
    assert_eq!(
        can_layered_continue(&pool(false, None), &configs[0], &done),
        None
    );
    let other_config = [build("b", R2, Some("Succeeded"), OLD)];
    assert_eq!(
        can_layered_continue(&pool(false, Some(R2)), &configs[0], &other_config),
        Some(false)
    );
}
