//! The kit's CRDs (`tests/crds/`) enforce the OpenShift 4.20 API contract, as openshift/api
//! release-4.20's published schema states it: the real kube-apiserver rejects each listed violation, one object per rule, and accepts the
//! objects MCO 4.20 writes. If a CRD in `tests/crds/` loosens, one of these cases fails.

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::mco;

const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

fn mosc(name: &str) -> Value {
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

fn mosb(name: &str) -> Value {
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

fn pool(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}
    })
}

/// A condition as a real API server requires it (reason and message present).
fn cond(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "reason": "Ready", "message": "",
           "lastTransitionTime": "2026-11-30T10:00:00Z"})
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

/// Sets `pointer` (a JSON pointer) in `v` to `value`; `Value::Null` removes it.
fn with(mut v: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    let target = v
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("parent exists");
    if value.is_null() {
        target.remove(key);
    } else {
        target.insert(key.to_owned(), value);
    }
    v
}

/// What a case does against the API server.
enum Op {
    /// Create this object.
    Create(Value),
    /// Create the first object, then write the second as its status (merge patch of `status`).
    Status(Value, Value),
    /// Create the first object and set its status to the second, then write the third status.
    StatusTwice(Value, Value, Value),
    /// Create the first object, then merge-patch it with the second.
    Update(Value, Value),
}

struct Api {
    client: kube::Client,
}

impl Api {
    fn for_object(&self, obj: &Value) -> kube::Api<DynamicObject> {
        match obj["kind"].as_str() {
            Some("MachineOSConfig") => mco::moscs(&self.client),
            Some("MachineOSBuild") => mco::mosbs(&self.client),
            _ => mco::mcps(&self.client),
        }
    }

    async fn create(&self, obj: &Value) -> Result<DynamicObject, kube::Error> {
        let dynamic: DynamicObject = serde_json::from_value(obj.clone()).expect("object decodes");
        self.for_object(obj)
            .create(&PostParams::default(), &dynamic)
            .await
    }

    async fn status(&self, obj: &Value, status: &Value) -> Result<DynamicObject, kube::Error> {
        let name = obj["metadata"]["name"].as_str().expect("named");
        self.for_object(obj)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
    }

    async fn run(&self, op: &Op) -> Result<DynamicObject, kube::Error> {
        match op {
            Op::Create(obj) => self.create(obj).await,
            Op::Status(obj, status) => {
                self.create(obj).await?;
                self.status(obj, status).await
            }
            Op::StatusTwice(obj, first, second) => {
                self.create(obj).await?;
                self.status(obj, first).await?;
                self.status(obj, second).await
            }
            Op::Update(obj, patch) => {
                self.create(obj).await?;
                let name = obj["metadata"]["name"].as_str().expect("named");
                self.for_object(obj)
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_rejects_each_contract_violation() {
    let cp = ControlPlane::start().await.expect("control plane");
    let api = Api {
        client: cp.client(),
    };
    let started = json!({"buildStart": "2026-11-30T10:00:00Z",
                         "conditions": [cond("Building", "True")]});
    // (what, operation, a fragment of the API server's message that names the rule)
    let cases: Vec<(&str, Op, &str)> = vec![
        // MachineOSConfig
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
        // MachineOSBuild
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
        // MachineConfigPool
        (
            "MCP without spec",
            Op::Create(with(pool("p1"), "/spec", Value::Null)),
            "spec: Required value",
        ),
        (
            "MCP selector expression without operator",
            Op::Create(with(
                pool("p2"),
                "/spec/nodeSelector",
                json!({"matchExpressions": [{"key": "a"}]}),
            )),
            "spec.nodeSelector.matchExpressions[0].operator: Required value",
        ),
        (
            "MCP synchronizer with more updated than machines",
            Op::Status(
                pool("p3"),
                json!({"poolSynchronizersStatus": [{"poolSynchronizerType": "PinnedImageSets", "machineCount": 1, "updatedMachineCount": 2, "readyMachineCount": 0, "availableMachineCount": 0, "unavailableMachineCount": 0}]}),
            ),
            "machineCount must be greater than or equal to updatedMachineCount",
        ),
        (
            "MCP synchronizer with more ready than available",
            Op::Status(
                pool("p4"),
                json!({"poolSynchronizersStatus": [{"poolSynchronizerType": "PinnedImageSets", "machineCount": 3, "updatedMachineCount": 0, "readyMachineCount": 2, "availableMachineCount": 1, "unavailableMachineCount": 0}]}),
            ),
            "availableMachineCount must be greater than or equal to readyMachineCount",
        ),
    ];

    let mut failures = Vec::new();
    for (what, op, expected) in &cases {
        match api.run(op).await {
            Err(kube::Error::Api(status))
                if status.code == 422 && status.message.contains(expected) => {}
            Err(e) => failures.push(format!("{what}: rejected, but not for {expected:?}: {e}")),
            Ok(_) => failures.push(format!(
                "{what}: ACCEPTED, expected a rejection naming {expected:?}"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} contract rules not enforced:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_as_mco_writes_them_pass_and_unknown_fields_are_pruned() {
    let cp = ControlPlane::start().await.expect("control plane");
    let api = Api {
        client: cp.client(),
    };
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

    // A pool with MCO's condition list (not keyed: the list is atomic).
    let p = pool("worker");
    api.create(&p).await.expect("MCP create");
    api.status(&p, &json!({"machineCount": 3, "updatedMachineCount": 1, "readyMachineCount": 1,
                            "unavailableMachineCount": 1, "degradedMachineCount": 0,
                            "conditions": [{"type": "Updating", "status": "True", "reason": "",
                                            "message": "Pool is waiting for OS image build to complete (mosb: worker-1)",
                                            "lastTransitionTime": "2026-11-30T10:00:00Z"}]}))
        .await
        .expect("MCP status");
}
