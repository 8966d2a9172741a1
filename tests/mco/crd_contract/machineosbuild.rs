//! MachineOSBuild: required spec fields and formats, immutable spec and build times, the
//! Job builder, condition limits and frozen terminal conditions, related objects.

use serde_json::{Value, json};

use super::{Api, Case, DIGEST, Op, REPO, cond, with};

pub(crate) fn mosb(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSBuild",
        "metadata": {"name": name},
        "spec": {
            "machineConfig": {"name": "rendered-worker-5f4c2e8b9d0a1c3e7b6f8d2a4c9e1b3d"},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": format!("{REPO}:{name}"),
        }
    })
}

fn succeeded_status() -> Value {
    json!({
        "buildStart": "2026-11-30T10:00:00Z",
        "buildEnd": "2026-11-30T10:00:01Z",
        "digestedImagePushSpec": format!("{REPO}@sha256:{DIGEST}"),
        "builder": {"imageBuilderType": "Job", "job": {"group": "batch", "resource": "jobs",
                     "namespace": "openshift-machine-config-operator", "name": "build-worker-1"}},
        "conditions": [cond("Prepared", "False"), cond("Building", "False"), cond("Succeeded", "True"),
                       cond("Failed", "False"), cond("Interrupted", "False")],
    })
}

pub(crate) fn cases() -> Vec<Case> {
    let started = json!({"buildStart": "2026-11-30T10:00:00Z",
                         "conditions": [cond("Building", "True")]});
    vec![
        (
            "MOSB without spec",
            Op::Create(with(mosb("b1"), "/spec", Value::Null)),
            "spec: Required value",
        ),
        (
            "MOSB rendered config name shorter than 10",
            Op::Create(with(
                mosb("b2"),
                "/spec/machineConfig/name",
                json!("rendered"),
            )),
            "should be at least 10 chars long",
        ),
        (
            "MOSB without machineOSConfig",
            Op::Create(with(mosb("b3"), "/spec/machineOSConfig", Value::Null)),
            "spec.machineOSConfig: Required value",
        ),
        (
            "MOSB push spec without a tag",
            Op::Create(with(mosb("b4"), "/spec/renderedImagePushSpec", json!(REPO))),
            "should follow the host[:port][/namespace]/name format",
        ),
        (
            "MOSB spec changed",
            Op::Update(
                mosb("b5"),
                json!({"spec": {"renderedImagePushSpec": format!("{REPO}:other")}}),
            ),
            "machineOSBuildSpec is immutable once set",
        ),
        (
            "MOSB buildEnd equal to buildStart",
            Op::Status(
                mosb("b6"),
                json!({"buildStart": "2026-11-30T10:00:00Z", "buildEnd": "2026-11-30T10:00:00Z"}),
            ),
            "buildEnd must be after buildStart",
        ),
        (
            "MOSB buildEnd without buildStart",
            Op::Status(mosb("b7"), json!({"buildEnd": "2026-11-30T10:00:01Z"})),
            "buildEnd must be after buildStart",
        ),
        (
            "MOSB buildStart changed",
            Op::StatusTwice(
                mosb("b8"),
                started.clone(),
                json!({"buildStart": "2026-11-30T10:00:05Z"}),
            ),
            "buildStart is immutable once set",
        ),
        (
            "MOSB buildEnd changed",
            Op::StatusTwice(
                mosb("b9"),
                succeeded_status(),
                json!({"buildEnd": "2026-11-30T10:00:09Z"}),
            ),
            "buildEnd is immutable once set",
        ),
        (
            "MOSB Job builder without job",
            Op::Status(mosb("b10"), json!({"builder": {"imageBuilderType": "Job"}})),
            "job is required when imageBuilderType is Job",
        ),
        (
            "MOSB builder without imageBuilderType",
            Op::Status(mosb("b11"), json!({"builder": {}})),
            "status.builder.imageBuilderType: Required value",
        ),
        (
            "MOSB with nine conditions",
            Op::Status(
                mosb("b12"),
                json!({"conditions": (0..9).map(|i| cond(&format!("C{i}"), "False")).collect::<Vec<_>>()}),
            ),
            "must have at most 8 items",
        ),
        (
            "MOSB conditions changed after Succeeded",
            Op::StatusTwice(
                mosb("b13"),
                succeeded_status(),
                json!({"conditions": [cond("Succeeded", "False")]}),
            ),
            "once an Succeeded condition is set, conditions are immutable",
        ),
        (
            "MOSB conditions changed after Failed",
            Op::StatusTwice(
                mosb("b14"),
                json!({"conditions": [cond("Failed", "True")]}),
                json!({"conditions": [cond("Failed", "False")]}),
            ),
            "once a Failed condition is set, conditions are immutable",
        ),
        (
            "MOSB conditions changed after Interrupted",
            Op::StatusTwice(
                mosb("b15"),
                json!({"conditions": [cond("Interrupted", "True")]}),
                json!({"conditions": [cond("Building", "True"), cond("Interrupted", "True")]}),
            ),
            "once an Interrupted condition is set, conditions are immutable",
        ),
        (
            "MOSB digested image by tag",
            Op::Status(
                mosb("b16"),
                json!({"digestedImagePushSpec": format!("{REPO}:latest")}),
            ),
            "must end with a valid '@sha256:<digest>' suffix",
        ),
        (
            "MOSB digested image on a dotless host",
            Op::Status(
                mosb("b17"),
                json!({"digestedImagePushSpec": format!("registry:5000/ocb-image@sha256:{DIGEST}")}),
            ),
            "should follow the host[:port][/namespace]/name format",
        ),
        (
            "MOSB with eleven related objects",
            Op::Status(
                mosb("b18"),
                json!({"relatedObjects": (0..11).map(|i| json!({"group": "", "resource": "configmaps", "name": format!("cm-{i}")})).collect::<Vec<_>>()}),
            ),
            "must have at most 10 items",
        ),
        (
            "MOSB related object without resource",
            Op::Status(
                mosb("b19"),
                json!({"relatedObjects": [{"group": "", "name": "cm"}]}),
            ),
            "status.relatedObjects[0].resource: Required value",
        ),
        (
            "MOSB condition reason with spaces",
            Op::Status(
                mosb("b20"),
                json!({"conditions": [with(cond("Building", "True"), "/reason", json!("still building"))]}),
            ),
            "status.conditions[0].reason: Invalid value",
        ),
    ]
}

/// The whole life of a MOSB as 4.20 writes it passes: created, started, succeeded.
pub(crate) async fn accepted(api: &Api) {
    // The whole life of a MOSB as 4.20 writes it: created, started, succeeded.
    let build = mosb("worker-0123456789abcdef0123456789abcdef");
    api.create(&with(
        with(
            mosb("worker-0123456789abcdef0123456789abcdef"),
            "/metadata/finalizers",
            json!(["foregroundDeletion"]),
        ),
        "/metadata/annotations",
        json!({"machineconfiguration.openshift.io/rendered-image-push-secret": "push-secret"}),
    ))
    .await
    .expect("MOSB create");
    api.status(
        &build,
        &json!({"buildStart": "2026-11-30T10:00:00Z",
                               "conditions": [cond("Prepared", "True"), cond("Building", "True")]}),
    )
    .await
    .expect("MOSB started");
    api.status(&build, &succeeded_status())
        .await
        .expect("MOSB succeeded");
}
