//! The Machine API objects of an installer-provisioned cluster (`machine.openshift.io/v1beta1`
//! Machines in `openshift-machine-api`, `tests/crds/machines.yaml`) and the pointer-Ignition
//! Secrets they boot from, as a MachineSet and the installer create them: names, API handles,
//! creation and small accessors. The simulator provisions them ([`crate::simulator`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::Result;
use crate::mco::str_at;

/// Namespace of the Machine API's objects.
pub const NAMESPACE: &str = "openshift-machine-api";
/// Machine label: its MachineSet.
pub const LABEL_MACHINESET: &str = "machine.openshift.io/cluster-api-machineset";
/// Machine label: its role (`worker`, `master`, `infra`).
pub const LABEL_MACHINE_ROLE: &str = "machine.openshift.io/cluster-api-machine-role";
/// Machine label: its type.
pub const LABEL_MACHINE_TYPE: &str = "machine.openshift.io/cluster-api-machine-type";
/// Machine label: the cluster's infrastructure name.
pub const LABEL_CLUSTER: &str = "machine.openshift.io/cluster-api-cluster";
/// Machine annotation: the cloud instance's state, as the provider reports it.
pub const INSTANCE_STATE: &str = "machine.openshift.io/instance-state";
/// The harness cluster's infrastructure name (the installer's `<cluster>-<5 chars>`).
pub const INFRA_NAME: &str = "ci-ln-x7q2m";
/// Where the Machine Config Server listens (the pointer Ignition's source host).
pub const MCS_URL: &str = "https://api-int.ci-ln-x7q2m.ci.example.com:22623";

/// ApiResource of Machine.
pub fn machine_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "Machine"),
        "machines",
    )
}

/// Machines in `openshift-machine-api`.
pub fn machines(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &machine_resource())
}

/// Machines in every namespace (what the guard and the simulator list).
pub fn all_machines(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &machine_resource())
}

/// Secrets in `openshift-machine-api`.
pub fn secrets(client: &kube::Client) -> Api<Secret> {
    Api::namespaced(client.clone(), NAMESPACE)
}

/// `<pool>-user-data`: the installer's name for the pointer Ignition of a pool's machines.
pub fn user_data_secret_name(pool: &str) -> String {
    format!("{pool}-user-data")
}

/// The pointer Ignition the installer writes into `<pool>-user-data` (key `userData`): it only
/// tells the machine to merge the Machine Config Server's `/config/<pool>`.
pub fn pointer_ignition(pool: &str) -> String {
    json!({
        "ignition": {
            "version": "3.2.0",
            "config": {"merge": [{"source": format!("{MCS_URL}/config/{pool}")}]},
        }
    })
    .to_string()
}

/// The pool whose Ignition a pointer-Ignition Secret makes the machine fetch: the last path
/// segment of its `/config/<pool>` source (`None` when the Secret says nothing readable).
pub fn pointer_pool(secret: &Secret) -> Option<String> {
    let data = secret.data.as_ref()?.get("userData")?;
    let ignition: Value = serde_json::from_slice(&data.0).ok()?;
    let source = ignition
        .pointer("/ignition/config/merge/0/source")
        .and_then(Value::as_str)?;
    let (_, pool) = source.rsplit_once("/config/")?;
    (!pool.is_empty()).then(|| pool.to_owned())
}

/// Creates `openshift-machine-api` (if needed) and the pointer-Ignition Secret `<pool>-user-data`
/// in it (if needed).
pub async fn ensure_user_data(client: &kube::Client, pool: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE},
    }))?;
    ignore_conflict(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await,
    )?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(user_data_secret_name(pool)),
            namespace: Some(NAMESPACE.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (
                "userData".to_owned(),
                ByteString(pointer_ignition(pool).into_bytes()),
            ),
            ("disableTemplating".to_owned(), ByteString(b"true".to_vec())),
        ])),
        ..Default::default()
    };
    ignore_conflict(
        secrets(client)
            .create(&PostParams::default(), &secret)
            .await,
    )
}

fn ignore_conflict<T>(result: std::result::Result<T, kube::Error>) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A Machine as its MachineSet `machine_set` creates it (no status yet): an AWS provider spec
/// booting from `<user_data_pool>-user-data`, the MachineSet's labels, and for a custom pool
/// (neither `worker` nor `master`) the node-role label of `pool` in `spec.metadata.labels`, which
/// the Machine API puts on the Node.
pub fn machine(name: &str, machine_set: &str, pool: &str, user_data_pool: &str) -> DynamicObject {
    let role = if pool == "master" { "master" } else { "worker" };
    let node_labels = if matches!(pool, "master" | "worker") {
        json!({})
    } else {
        json!({format!("node-role.kubernetes.io/{pool}"): ""})
    };
    let mut machine = DynamicObject::new(name, &machine_resource())
        .within(NAMESPACE)
        .data(json!({
            "spec": {
                "metadata": {"labels": node_labels},
                "providerSpec": {"value": {
                    "apiVersion": "machine.openshift.io/v1beta1",
                    "kind": "AWSMachineProviderConfig",
                    "instanceType": "m6i.xlarge",
                    "placement": {"availabilityZone": "us-east-2a", "region": "us-east-2"},
                    "userDataSecret": {"name": user_data_secret_name(user_data_pool)},
                    "credentialsSecret": {"name": "aws-cloud-credentials"},
                }},
            }
        }));
    machine.metadata.labels = Some(BTreeMap::from([
        (LABEL_CLUSTER.to_owned(), INFRA_NAME.to_owned()),
        (LABEL_MACHINE_ROLE.to_owned(), role.to_owned()),
        (LABEL_MACHINE_TYPE.to_owned(), role.to_owned()),
        (LABEL_MACHINESET.to_owned(), machine_set.to_owned()),
    ]));
    machine
}

/// Creates Machine `name` of MachineSet `machine_set` for `pool`, booting from
/// `<pool>-user-data` (created if needed), as a MachineSet scaling up does.
pub async fn create_machine(
    client: &kube::Client,
    name: &str,
    machine_set: &str,
    pool: &str,
) -> Result<()> {
    ensure_user_data(client, pool).await?;
    machines(client)
        .create(
            &PostParams::default(),
            &machine(name, machine_set, pool, pool),
        )
        .await?;
    tracing::info!(
        "scenario: MachineSet {machine_set} created Machine {NAMESPACE}/{name} (pool {pool})"
    );
    Ok(())
}

/// `status.phase`.
pub fn phase(machine: &DynamicObject) -> Option<&str> {
    str_at(&machine.data, &["status", "phase"])
}

/// `status.nodeRef.name`: the Node the machine became, once registered.
pub fn node_ref(machine: &DynamicObject) -> Option<&str> {
    str_at(&machine.data, &["status", "nodeRef", "name"])
}

/// `spec.providerID`, set once the cloud instance exists.
pub fn provider_id(machine: &DynamicObject) -> Option<&str> {
    str_at(&machine.data, &["spec", "providerID"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pointer_ignition_names_its_pool() {
        let secret = Secret {
            data: Some(BTreeMap::from([(
                "userData".to_owned(),
                ByteString(pointer_ignition("infra").into_bytes()),
            )])),
            ..Default::default()
        };
        assert_eq!(pointer_pool(&secret).as_deref(), Some("infra"));
        assert_eq!(pointer_pool(&Secret::default()), None);
    }

    #[test]
    fn a_custom_pool_machine_labels_its_node_with_the_pool_role() {
        let m = machine("m", "ms", "infra", "worker");
        assert_eq!(
            m.data
                .pointer("/spec/metadata/labels/node-role.kubernetes.io~1infra"),
            Some(&json!(""))
        );
        assert_eq!(
            str_at(
                &m.data,
                &["spec", "providerSpec", "value", "userDataSecret", "name"]
            ),
            Some("worker-user-data")
        );
        let w = machine("w", "ms", "worker", "worker");
        assert_eq!(w.data.pointer("/spec/metadata/labels"), Some(&json!({})));
    }
}
