//! AdmissionReviews as kube-apiserver sends them to a webhook (`admission.k8s.io/v1`), for
//! posting to the guard's /validate or /mutate directly, or to an in-process server; and the
//! answer of a stand-in webhook that allows everything ([`allow`]).
//!
//! ```ignore
//! let body = Review::delete(MACHINE_OS_CONFIG, mosc).dry_run(true).user("eve").json();
//! ```

use serde_json::{Value, json};

use crate::mco::GROUP;

/// What a review is about: the object's kind and the resource it was requested through.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub resource: &'static str,
}

/// `machineconfiguration.openshift.io/v1` MachineOSConfig.
pub const MACHINE_OS_CONFIG: Target = Target {
    group: GROUP,
    version: "v1",
    kind: "MachineOSConfig",
    resource: "machineosconfigs",
};

/// `machineconfiguration.openshift.io/v1` MachineOSBuild.
pub const MACHINE_OS_BUILD: Target = Target {
    group: GROUP,
    version: "v1",
    kind: "MachineOSBuild",
    resource: "machineosbuilds",
};

/// `v1` ConfigMap: something the guard has no business with.
pub const CONFIG_MAP: Target = Target {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    resource: "configmaps",
};

/// The uid of a review unless [`Review::uid`] sets another.
pub const UID: &str = "3c9f2a58-5d0e-4a43-9d34-1f0b2b5e9e01";

/// One AdmissionReview request; [`Review::json`] is the body to post. By default: uid [`UID`],
/// the cluster admin (`system:admin` in `system:masters`) as the user, not a dry run, named
/// after its old object (else its object), and the API server's options for the operation
/// (`DeleteOptions`, `UpdateOptions` or `CreateOptions`).
#[derive(Clone, Debug)]
#[must_use]
pub struct Review {
    request: serde_json::Map<String, Value>,
}

impl Review {
    /// A request of `operation` (`DELETE`, `UPDATE`, `CREATE`, or anything a test sends) on
    /// `target`, with no object yet.
    pub fn new(operation: &str, target: Target) -> Self {
        let kind = json!({"group": target.group, "version": target.version, "kind": target.kind});
        let resource =
            json!({"group": target.group, "version": target.version, "resource": target.resource});
        let options = match operation {
            "UPDATE" => "UpdateOptions",
            "CREATE" => "CreateOptions",
            _ => "DeleteOptions",
        };
        let request = json!({
            "uid": UID,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": "",
            "operation": operation,
            "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "object": null,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
        });
        let Value::Object(request) = request else {
            unreachable!("a JSON object literal")
        };
        Self { request }
    }

    /// A DELETE of `old` (the object as stored; its `metadata.name` names the request).
    pub fn delete(target: Target, old: Value) -> Self {
        Self::new("DELETE", target).old_object(old)
    }

    /// An UPDATE from `old` to `new`.
    pub fn update(target: Target, old: Value, new: Value) -> Self {
        Self::new("UPDATE", target).old_object(old).object(new)
    }

    /// A CREATE of `new`.
    pub fn create(target: Target, new: Value) -> Self {
        Self::new("CREATE", target).object(new)
    }

    /// The old object (and the request's name, from its `metadata.name`).
    pub fn old_object(mut self, old: Value) -> Self {
        self.name_after(&old);
        self.request.insert("oldObject".into(), old);
        self
    }

    /// The new object (and the request's name, if no old object named it).
    pub fn object(mut self, new: Value) -> Self {
        if self.request["oldObject"].is_null() {
            self.name_after(&new);
        }
        self.request.insert("object".into(), new);
        self
    }

    fn name_after(&mut self, object: &Value) {
        let name = object["metadata"]["name"].clone();
        if !name.is_null() {
            self.request.insert("name".into(), name);
        }
    }

    /// The request's uid (echoed in the response).
    pub fn uid(self, uid: &str) -> Self {
        self.set("uid", json!(uid))
    }

    /// The request's name (whatever the objects say).
    pub fn name(self, name: &str) -> Self {
        self.set("name", json!(name))
    }

    /// The request's namespace.
    pub fn namespace(self, namespace: &str) -> Self {
        self.set("namespace", json!(namespace))
    }

    /// The requesting user, in no group.
    pub fn user(self, username: &str) -> Self {
        self.set("userInfo", json!({"username": username}))
    }

    /// A dry run (`dryRun: true`, and `dryRun: ["All"]` in the options, as the API server sends
    /// it) or not.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        if let Some(Value::Object(options)) = self.request.get_mut("options") {
            if dry_run {
                options.insert("dryRun".into(), json!(["All"]));
            } else {
                options.remove("dryRun");
            }
        }
        self.set("dryRun", json!(dry_run))
    }

    /// Sets any field of the request to any value (e.g. a `subResource`, or a malformed value).
    pub fn set(mut self, field: &str, value: Value) -> Self {
        self.request.insert(field.into(), value);
        self
    }

    /// The AdmissionReview to post.
    pub fn json(self) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": Value::Object(self.request),
        })
    }
}

/// What a stand-in webhook answers to `review` (an AdmissionReview as posted): allowed, with
/// the request's uid.
pub fn allow(review: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_is_named_after_its_old_object_and_a_dry_run_says_so_twice() {
        let old = json!({"metadata": {"name": "worker"}});
        let review = Review::delete(MACHINE_OS_CONFIG, old.clone())
            .dry_run(true)
            .json();
        let request = &review["request"];
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(request["name"], "worker");
        assert_eq!(request["oldObject"], old);
        assert_eq!(request["object"], Value::Null);
        assert_eq!(request["resource"]["resource"], "machineosconfigs");
        assert_eq!(request["requestKind"], request["kind"]);
        assert_eq!(request["dryRun"], true);
        assert_eq!(request["options"]["dryRun"], json!(["All"]));
        assert_eq!(request["options"]["kind"], "DeleteOptions");
    }

    #[test]
    fn a_stand_in_allows_with_the_requests_uid() {
        let review = Review::create(MACHINE_OS_BUILD, json!({}))
            .uid("u-1")
            .json();
        let answer = allow(&review);
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"], json!({"uid": "u-1", "allowed": true}));
    }

    #[test]
    fn a_create_is_named_after_its_object() {
        let new = json!({"metadata": {"name": "infra"}});
        let review = Review::create(MACHINE_OS_BUILD, new).uid("u").json();
        assert_eq!(review["request"]["name"], "infra");
        assert_eq!(review["request"]["uid"], "u");
        assert_eq!(review["request"]["options"]["kind"], "CreateOptions");
    }
}
