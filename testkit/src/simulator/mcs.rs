//! The Machine Config Server: what it serves a machine that fetches `/config/<pool>` at first
//! boot (`clusterServer.GetConfig`, `pkg/server/cluster_server.go`). The rendered config is the
//! pool's `spec.configuration` once a machine of the pool has updated
//! (`status.updatedMachineCount > 0`), its `status.configuration` before. From 4.21 it also
//! resolves the pool's layered image (`resolveDesiredImageForPool`) and puts it into the config
//! (`appendDesiredOSImage`) and into the node annotations the machine starts with
//! (`getNodeAnnotation`: currentImage = desiredImage = the image):
//!
//! - the first MOSC whose `spec.machineConfigPool.name` is the pool has `status.currentImagePullSpec`;
//! - the first MOSB whose `spec.machineOSConfig.name` is that MOSC and `spec.machineConfig.name`
//!   the served config has Succeeded (no check of its image, uid or deletion);
//! - the pool's `status.updatedMachineCount` is above 0;
//! - the image is not in the internal registry (a machine cannot resolve its Service before it
//!   joins); the harness registry `127.0.0.1:PORT` is external.
//!
//! The served image is the MOSC's `status.currentImagePullSpec`, as written.

use kube::api::DynamicObject;
use serde_json::Value;

use crate::mco::{self, str_at};
use crate::release::Release;

/// What the Machine Config Server hands a joining machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Served {
    /// The rendered MachineConfig (the node's currentConfig and desiredConfig).
    pub config: String,
    /// The layered image (the node's currentImage and desiredImage), if any.
    pub image: Option<String>,
}

/// What `release`'s MCS serves for `pool`, or the error it answers with (Ignition retries).
pub(super) fn serve(
    release: Release,
    pool: &DynamicObject,
    moscs: &[DynamicObject],
    mosbs: &[DynamicObject],
) -> Result<Served, String> {
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let config = served_config(pool)
        .ok_or_else(|| format!("could not fetch config for pool {name}: no rendered config yet"))?;
    let image = if release.serves_layered_image_to_joining_machines() {
        desired_image_for_pool(pool, &config, moscs, mosbs)
    } else {
        None
    };
    Ok(Served { config, image })
}

/// `currConf`: `spec.configuration.name` once a machine updated, else `status.configuration.name`.
fn served_config(pool: &DynamicObject) -> Option<String> {
    let at = if updated_machine_count(pool) > 0 {
        "spec"
    } else {
        "status"
    };
    str_at(&pool.data, &[at, "configuration", "name"]).map(str::to_owned)
}

fn updated_machine_count(pool: &DynamicObject) -> u64 {
    pool.data
        .pointer("/status/updatedMachineCount")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `resolveDesiredImageForPool`.
fn desired_image_for_pool(
    pool: &DynamicObject,
    config: &str,
    moscs: &[DynamicObject],
    mosbs: &[DynamicObject],
) -> Option<String> {
    let name = pool.metadata.name.as_deref()?;
    let mosc = moscs
        .iter()
        .find(|m| str_at(&m.data, &["spec", "machineConfigPool", "name"]) == Some(name))?;
    let image = str_at(&mosc.data, &["status", "currentImagePullSpec"])?;
    let mosc_name = mosc.metadata.name.as_deref()?;
    let build = mosbs.iter().find(|b| {
        str_at(&b.data, &["spec", "machineOSConfig", "name"]) == Some(mosc_name)
            && str_at(&b.data, &["spec", "machineConfig", "name"]) == Some(config)
    })?;
    if !mco::condition_true(build, "Succeeded") || updated_machine_count(pool) == 0 {
        return None;
    }
    (!internal_registry(image)).then(|| image.to_owned())
}

/// Whether `image` names the internal registry by its Service's host name.
fn internal_registry(image: &str) -> bool {
    let host = image.split('/').next().unwrap_or_default();
    let host = host.split(':').next().unwrap_or_default();
    host.ends_with(".openshift-image-registry.svc")
        || host.ends_with(".openshift-image-registry.svc.cluster.local")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE: &str = "127.0.0.1:5000/openshift-machine-config-operator/ocb-image@sha256:aa";

    fn object(name: &str, data: Value) -> DynamicObject {
        DynamicObject::new(name, &mco::mcp_resource()).data(data)
    }

    fn pool(updated: u64) -> DynamicObject {
        object(
            "worker",
            json!({"spec": {"configuration": {"name": "rendered-worker-new"}},
                   "status": {"configuration": {"name": "rendered-worker-old"},
                              "updatedMachineCount": updated}}),
        )
    }

    fn mosc(image: &str) -> DynamicObject {
        object(
            "worker",
            json!({"spec": {"machineConfigPool": {"name": "worker"}},
                   "status": {"currentImagePullSpec": image}}),
        )
    }

    fn mosb(config: &str, succeeded: &str) -> DynamicObject {
        object(
            "worker-1",
            json!({"spec": {"machineOSConfig": {"name": "worker"}, "machineConfig": {"name": config}},
                   "status": {"conditions": [{"type": "Succeeded", "status": succeeded}]}}),
        )
    }

    #[test]
    fn from_4_21_a_built_pool_with_an_updated_machine_serves_its_image() {
        let (moscs, mosbs) = ([mosc(IMAGE)], [mosb("rendered-worker-new", "True")]);
        let served = serve(Release::V4_21, &pool(1), &moscs, &mosbs);
        assert_eq!(
            served,
            Ok(Served {
                config: "rendered-worker-new".into(),
                image: Some(IMAGE.into())
            })
        );
        let older = serve(Release::V4_20, &pool(1), &moscs, &mosbs);
        assert_eq!(older.map(|s| s.image), Ok(None), "4.20 serves no image");
    }

    #[test]
    fn each_condition_of_resolve_desired_image_for_pool_is_needed() {
        let served = |p: &DynamicObject, moscs: &[DynamicObject], mosbs: &[DynamicObject]| {
            serve(Release::V4_23, p, moscs, mosbs).map(|s| s.image)
        };
        let built = [mosb("rendered-worker-new", "True")];
        assert_eq!(served(&pool(1), &[], &built), Ok(None), "no MOSC");
        assert_eq!(
            served(&pool(1), &[mosc("")], &built),
            Ok(None),
            "no image yet"
        );
        let moscs = [mosc(IMAGE)];
        assert_eq!(
            served(&pool(1), &moscs, &[mosb("rendered-worker-new", "False")]),
            Ok(None),
            "build not succeeded"
        );
        assert_eq!(
            served(&pool(1), &moscs, &[mosb("rendered-worker-old", "True")]),
            Ok(None),
            "no build of the served config"
        );
        // No machine updated: the served config is status.configuration, and no image.
        let none_updated = serve(Release::V4_21, &pool(0), &moscs, &built);
        assert_eq!(
            none_updated,
            Ok(Served {
                config: "rendered-worker-old".into(),
                image: None
            })
        );
        let internal = "image-registry.openshift-image-registry.svc:5000/ns/ocb-image@sha256:aa";
        assert_eq!(
            served(&pool(1), &[mosc(internal)], &built),
            Ok(None),
            "internal registry"
        );
    }

    #[test]
    fn a_pool_without_a_rendered_config_is_an_error() {
        let bare = object("worker", json!({"spec": {}}));
        assert!(serve(Release::V4_21, &bare, &[], &[]).is_err());
    }
}
