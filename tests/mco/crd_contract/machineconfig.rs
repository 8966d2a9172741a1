//! MachineConfig: typed spec fields (no required ones), unknown spec fields pruned, the
//! Ignition config kept as written.

use serde_json::{Value, json};

use super::{Api, Case, Op, with};

/// A rendered config as MCO's render controller writes one.
pub(crate) fn rendered(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "annotations": {
            "machineconfiguration.openshift.io/generated-by-controller-version": "5b1d6a1e0a7c3f2b9e8d4c6a1f0b2e3d4c5a6b7e"}},
        "spec": {
            "config": {"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core"}]}},
            "osImageURL": format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}", super::DIGEST),
            "extensions": [], "fips": false, "kernelArguments": [], "kernelType": "default",
        }
    })
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        (
            "MC fips not a boolean",
            Op::Create(with(
                rendered("rendered-worker-c1"),
                "/spec/fips",
                json!("yes"),
            )),
            "spec.fips in body must be of type boolean",
        ),
        (
            "MC kernel argument not a string",
            Op::Create(with(
                rendered("rendered-worker-c2"),
                "/spec/kernelArguments",
                json!([1]),
            )),
            "spec.kernelArguments[0] in body must be of type string",
        ),
        (
            "MC extensions not a list",
            Op::Create(with(
                rendered("rendered-worker-c3"),
                "/spec/extensions",
                json!("usbguard"),
            )),
            "spec.extensions in body must be of type array",
        ),
    ]
}

/// A rendered config passes with its Ignition config kept whole; an unknown spec field goes.
pub(crate) async fn accepted(api: &Api) {
    let config = with(
        rendered("rendered-worker-5f4c2e8b9d0a1c3e7b6f8d2a4c9e1b3d"),
        "/spec/bogus",
        json!("dropped"),
    );
    let stored = api.create(&config).await.expect("MC create");
    assert_eq!(
        stored.data["spec"].get("bogus"),
        None,
        "unknown spec field kept"
    );
    assert_eq!(
        stored.data["spec"]["config"], config["spec"]["config"],
        "the Ignition config is kept as written"
    );
    // Nothing is required: an empty MachineConfig is valid.
    api.create(
        &json!({"apiVersion": "machineconfiguration.openshift.io/v1",
                       "kind": "MachineConfig", "metadata": {"name": "99-empty"}}),
    )
    .await
    .expect("an empty MC");
}
