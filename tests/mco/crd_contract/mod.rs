//! The kit's CRDs (`tests/crds/`) enforce the OpenShift 4.20 API contract, as openshift/api
//! release-4.20's published schema states it (and the release CRD of ClusterVersion): the real
//! kube-apiserver rejects each listed violation, one object per rule, and accepts the objects MCO
//! 4.20 (and the cluster-version operator) writes. If a CRD in `tests/crds/` loosens, one of
//! these cases fails. One file per kind: [`machineosconfig`], [`machineosbuild`],
//! [`machineconfigpool`], [`machineconfig`], [`clusterversion`].

mod clusterversion;
mod machineconfig;
mod machineconfigpool;
mod machineosbuild;
mod machineosconfig;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use testkit::controlplane::ControlPlane;
use testkit::mco;

const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const REPO: &str =
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-image";

/// One rule: what breaks it, the operation, and a fragment of the API server's message that
/// names the rule.
type Case = (&'static str, Op, &'static str);

/// A condition as a real API server requires it (reason and message present).
fn cond(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "reason": "Ready", "message": "",
           "lastTransitionTime": "2026-11-30T10:00:00Z"})
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
    /// Merge-patch the existing object (its kind and name) with the second.
    Patch(Value, Value),
    /// Merge-patch the existing object's status with the second.
    PatchStatus(Value, Value),
}

struct Api {
    client: kube::Client,
}

impl Api {
    fn for_object(&self, obj: &Value) -> kube::Api<DynamicObject> {
        match obj["kind"].as_str() {
            Some("MachineOSConfig") => mco::moscs(&self.client),
            Some("MachineOSBuild") => mco::mosbs(&self.client),
            Some("ClusterVersion") => testkit::clusterversion::api(&self.client),
            Some("MachineConfig") => mco::mcs(&self.client),
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

    async fn patch(&self, obj: &Value, patch: &Value) -> Result<DynamicObject, kube::Error> {
        let name = obj["metadata"]["name"].as_str().expect("named");
        self.for_object(obj)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
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
                self.patch(obj, patch).await
            }
            Op::Patch(obj, patch) => self.patch(obj, patch).await,
            Op::PatchStatus(obj, status) => self.status(obj, status).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_rejects_each_contract_violation() {
    let cp = ControlPlane::start().await.expect("control plane");
    let api = Api {
        client: cp.client(),
    };
    let mut cases: Vec<Case> = machineosconfig::cases();
    cases.extend(machineosbuild::cases());
    cases.extend(machineconfigpool::cases());
    cases.extend(machineconfig::cases());
    cases.extend(clusterversion::cases());

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
    machineosbuild::accepted(&api).await;
    machineosconfig::accepted(&api).await;
    machineconfigpool::accepted(&api).await;
    machineconfig::accepted(&api).await;
    clusterversion::accepted(&cp).await;
}
