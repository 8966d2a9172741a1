//! MachineOSConfig: required spec fields, the name = pool rule, name and image formats,
//! containerFile limits, status formats and conditions.

use serde_json::{Value, json};

use super::{Api, Case, DIGEST, Op, REPO, cond, with};

pub(crate) fn mosc(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": name},
        "spec": {
            "machineConfigPool": {"name": name},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": format!("{REPO}:latest"),
            "containerFile": [{"containerfileArch": "NoArch", "content": "FROM configs AS final\n"}],
        }
    })
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        (
            "MOSC without spec",
            Op::Create(with(mosc("c1"), "/spec", Value::Null)),
            "spec: Required value",
        ),
        (
            "MOSC without imageBuilder",
            Op::Create(with(mosc("c2"), "/spec/imageBuilder", Value::Null)),
            "spec.imageBuilder: Required value",
        ),
        (
            "MOSC without renderedImagePushSecret",
            Op::Create(with(
                mosc("c3"),
                "/spec/renderedImagePushSecret",
                Value::Null,
            )),
            "spec.renderedImagePushSecret: Required value",
        ),
        (
            "MOSC without renderedImagePushSpec",
            Op::Create(with(mosc("c4"), "/spec/renderedImagePushSpec", Value::Null)),
            "spec.renderedImagePushSpec: Required value",
        ),
        (
            "MOSC imageBuilderType other than Job",
            Op::Create(with(
                mosc("c5"),
                "/spec/imageBuilder/imageBuilderType",
                json!("Pod"),
            )),
            "supported values: \"Job\"",
        ),
        (
            "MOSC name differs from its pool",
            Op::Create(with(
                mosc("c6"),
                "/spec/machineConfigPool/name",
                json!("infra"),
            )),
            "spec.machineConfigPool.name must match metadata.name",
        ),
        (
            "MOSC pool name not an RFC 1123 subdomain",
            Op::Create(with(
                with(
                    mosc("c7"),
                    "/spec/machineConfigPool/name",
                    json!("Worker_1"),
                ),
                "/metadata/name",
                json!("c7"),
            )),
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "MOSC push secret name not an RFC 1123 subdomain",
            Op::Create(with(
                mosc("c8"),
                "/spec/renderedImagePushSecret/name",
                json!("Push Secret"),
            )),
            "a lowercase RFC 1123 subdomain",
        ),
        (
            "MOSC push spec on a dotless host",
            Op::Create(with(
                mosc("c9"),
                "/spec/renderedImagePushSpec",
                json!("localhost:5000/ocb-image:latest"),
            )),
            "should follow the host[:port][/namespace]/name format",
        ),
        (
            "MOSC push spec without a tag",
            Op::Create(with(
                mosc("c10"),
                "/spec/renderedImagePushSpec",
                json!("quay.io/example/ocb-image"),
            )),
            "should follow the host[:port][/namespace]/name format",
        ),
        (
            "MOSC push spec longer than 447",
            Op::Create(with(
                mosc("c11"),
                "/spec/renderedImagePushSpec",
                json!(format!("quay.io/{}:latest", "a".repeat(440))),
            )),
            "spec.renderedImagePushSpec: Too long",
        ),
        (
            "MOSC with five containerFiles",
            Op::Create(with(
                mosc("c12"),
                "/spec/containerFile",
                json!(
                    ["NoArch", "AMD64", "ARM64", "PPC64LE", "S390X"]
                        .iter()
                        .map(|a| json!({"containerfileArch": a, "content": "FROM x"}))
                        .collect::<Vec<_>>()
                ),
            )),
            "must have at most 4 items",
        ),
        (
            "MOSC containerFile content over 4096",
            Op::Create(with(
                mosc("c13"),
                "/spec/containerFile/0/content",
                json!("x".repeat(4097)),
            )),
            "spec.containerFile[0].content: Too long",
        ),
        (
            "MOSC containerFile without content",
            Op::Create(with(
                mosc("c14"),
                "/spec/containerFile/0/content",
                Value::Null,
            )),
            "spec.containerFile[0].content: Required value",
        ),
        (
            "MOSC containerfileArch outside the enum",
            Op::Create(with(
                mosc("c15"),
                "/spec/containerFile/0/containerfileArch",
                json!("X86"),
            )),
            "supported values: \"ARM64\", \"AMD64\", \"PPC64LE\", \"S390X\", \"NoArch\"",
        ),
        (
            "MOSC current image by tag",
            Op::Status(
                mosc("c16"),
                json!({"currentImagePullSpec": format!("{REPO}:latest")}),
            ),
            "must end with a valid '@sha256:<digest>' suffix",
        ),
        (
            "MOSC current image with upper-case hex",
            Op::Status(
                mosc("c17"),
                json!({"currentImagePullSpec": format!("{REPO}@sha256:{}", DIGEST.to_uppercase())}),
            ),
            "must end with a valid '@sha256:<digest>' suffix",
        ),
        (
            "MOSC current image with two path segments",
            Op::Status(
                mosc("c18"),
                json!({"currentImagePullSpec": format!("quay.io/a/b/ocb-image@sha256:{DIGEST}")}),
            ),
            "should follow the host[:port][/namespace]/name format",
        ),
        (
            "MOSC observedGeneration moving backwards",
            Op::StatusTwice(
                mosc("c19"),
                json!({"observedGeneration": 2}),
                json!({"observedGeneration": 1}),
            ),
            "observedGeneration must not move backwards",
        ),
        (
            "MOSC condition reason with spaces",
            Op::Status(
                mosc("c20"),
                json!({"conditions": [with(cond("Ready", "True"), "/reason", json!("not a reason"))]}),
            ),
            "status.conditions[0].reason: Invalid value",
        ),
        (
            "MOSC condition without message",
            Op::Status(
                mosc("c21"),
                json!({"conditions": [with(cond("Ready", "True"), "/message", Value::Null)]}),
            ),
            "status.conditions[0].message: Required value",
        ),
        (
            "MOSC condition without reason",
            Op::Status(
                mosc("c22"),
                json!({"conditions": [with(cond("Ready", "True"), "/reason", Value::Null)]}),
            ),
            "status.conditions[0].reason: Required value",
        ),
        (
            "MOSC condition status outside True/False/Unknown",
            Op::Status(mosc("c23"), json!({"conditions": [cond("Ready", "Maybe")]})),
            "supported values: \"True\", \"False\", \"Unknown\"",
        ),
        (
            "MOSC condition without lastTransitionTime",
            Op::Status(
                mosc("c24"),
                json!({"conditions": [with(cond("Ready", "True"), "/lastTransitionTime", Value::Null)]}),
            ),
            "status.conditions[0].lastTransitionTime: Required value",
        ),
    ]
}

/// A MOSC as 4.20 writes it passes; unknown fields are pruned.
pub(crate) async fn accepted(api: &Api) {
    // A MOSC, with a digested current image on the harness registry's loopback host.
    let config = mosc("worker");
    api.create(&with(config.clone(), "/spec/bogus", json!("dropped")))
        .await
        .expect("MOSC create");
    let stored = api
        .status(
            &config,
            &json!({"currentImagePullSpec": format!("127.0.0.1:5000/openshift-machine-config-operator/ocb-image@sha256:{DIGEST}"),
                    "observedGeneration": 1, "bogus": true}),
        )
        .await
        .expect("MOSC status");
    assert_eq!(
        stored.data["spec"].get("bogus"),
        None,
        "unknown spec field kept"
    );
    assert_eq!(
        stored.data["status"].get("bogus"),
        None,
        "unknown status field kept"
    );
    // A loopback registry with a port is a valid push spec (an IP address has dots).
    api.create(&with(
        mosc("infra"),
        "/spec/renderedImagePushSpec",
        json!("127.0.0.1:5000/openshift-machine-config-operator/ocb-image:latest"),
    ))
    .await
    .expect("MOSC on the loopback registry");
}
