//! The registry nodes pull from, as production serves it: the kit's open [`Registry`]'s storage
//! behind TLS (a throw-away CA) and Docker token auth ([`TokenServer`]), and the ControllerConfig
//! that tells nodes (and the guard) how to reach it: the pull secret for [`NODE_USER`], the CA
//! as a per-host bundle (`..` for `:`). The nodes' user may only pull; MCO's push secret
//! ([`SecureFace::push_secret`], [`PUSH_USER`]) may do everything, deletes included.

use base64::Engine as _;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::Result;
use crate::https_stub::TokenServer;
use crate::mco::{CONTROLLER_CONFIGS, IMAGE_DIGEST_MIRROR_SETS, Kind, dynamic_api};
use crate::pki::{CertPair, Pki};
use crate::registry::{Registry, SecureRegistry};

/// The user of the nodes' pull secret (the machine-os-puller's token, in a real cluster).
pub const NODE_USER: &str = "machine-os-puller";
/// Its password: tests check that it appears in no output, log, Event or metric.
pub const NODE_PASSWORD: &str = "node-pull-SECRET-9f8e7d";

/// The user of MCO's push secret (the builder's credentials, in a real cluster): pull, push and
/// delete.
pub const PUSH_USER: &str = "machine-os-builder";
/// Its password: tests check that it appears in no output.
pub const PUSH_PASSWORD: &str = "push-SECRET-1a2b3c";

/// A name the registry's certificate carries that no DNS resolves: only a proxy that knows
/// where it is can reach it ([`crate::connect_proxy`]), as behind a cluster proxy.
pub const PROXIED_NAME: &str = "registry.proxied.test";

/// The TLS, token-authenticated face of an open registry's storage, and what it takes to trust
/// it.
pub struct SecureFace {
    pub secure: SecureRegistry,
    pub pki: Pki,
    /// A serving certificate of [`SecureFace::pki`] for 127.0.0.1 (for stub hosts beside it).
    pub serving: CertPair,
    _token: TokenServer,
    _dir: tempfile::TempDir,
}

impl SecureFace {
    /// Starts the token service and the secure registry over `open`'s storage.
    pub async fn over(open: &Registry) -> Result<Self> {
        Self::over_with(open, true).await
    }

    /// [`SecureFace::over`], with deletes allowed or not (distribution's `storage.delete`).
    pub async fn over_with(open: &Registry, deletes: bool) -> Result<Self> {
        crate::tls::ensure_crypto_provider();
        let dir = crate::temp_dir("mosc-guard-node-registry-")?;
        let pki = Pki::new(dir.path())?;
        let serving = pki.server_cert("registry", &["127.0.0.1", "localhost", PROXIED_NAME])?;
        let token = TokenServer::start_for(
            &serving,
            &[
                (NODE_USER, NODE_PASSWORD, &["pull"]),
                (PUSH_USER, PUSH_PASSWORD, &["*"]),
            ],
        )
        .await?;
        let secure = open.secure_front_with(&serving, &token, deletes).await?;
        Ok(SecureFace {
            secure,
            pki,
            serving,
            _token: token,
            _dir: dir,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> &str {
        self.secure.host()
    }

    /// A `kubernetes.io/dockerconfigjson` Secret `name` in `openshift-machine-config-operator`
    /// holding `user`:`password` for this registry (MCO's push secret with [`PUSH_USER`]).
    pub fn push_secret(&self, name: &str, user: &str, password: &str) -> Value {
        let auth = base64(&format!("{user}:{password}"));
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "openshift-machine-config-operator"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": json!({"auths": {self.host(): {"auth": auth}}}).to_string()},
        })
    }

    /// Creates [`SecureFace::push_secret`] `name` for [`PUSH_USER`] in the cluster.
    pub async fn install_push_secret(&self, client: &kube::Client, name: &str) -> Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), "openshift-machine-config-operator");
        let secret = serde_json::from_value(self.push_secret(name, PUSH_USER, PUSH_PASSWORD))?;
        api.create(&PostParams::default(), &secret)
            .await
            .map_err(|e| format!("creating push secret {name}: {e}"))?;
        Ok(())
    }

    /// The ControllerConfig's `spec.internalRegistryPullSecret` (base64, as the API holds it)
    /// for the nodes' user with `password`.
    pub fn node_pull_secret(&self, password: &str) -> String {
        let auth = base64(&format!("{NODE_USER}:{password}"));
        base64(&json!({"auths": {self.host(): {"auth": auth}}}).to_string())
    }

    /// Replaces the ControllerConfig's node pull secret with one holding `password` (what an
    /// admin rotating the pull secret, or a wrong one, does to every node).
    pub async fn set_node_password(&self, client: &kube::Client, password: &str) -> Result<()> {
        dynamic_api(client, CONTROLLER_CONFIGS)
            .patch(
                "machine-config-controller",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {
                    "internalRegistryPullSecret": self.node_pull_secret(password)
                }})),
            )
            .await
            .map_err(|e| format!("patching the ControllerConfig's pull secret: {e}"))?;
        Ok(())
    }

    /// A ControllerConfig `machine-config-controller` as MCO writes it (every field the API
    /// requires), holding the nodes' pull secret for this registry and its CA.
    pub fn controller_config(&self) -> Value {
        let zeros = "0".repeat(64);
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {
                "additionalTrustBundle": null,
                "baseOSContainerImage": format!("quay.example/openshift/rhel-coreos@sha256:{zeros}"),
                "cloudProviderCAData": null,
                "cloudProviderConfig": "",
                "clusterDNSIP": "172.30.0.10",
                "dns": null,
                "images": {},
                "infra": null,
                "ipFamilies": "IPv4",
                "kubeAPIServerServingCAData": base64("not used by the kit"),
                "network": null,
                "proxy": null,
                "releaseImage": format!("quay.example/openshift-release-dev/ocp-release@sha256:{zeros}"),
                "rootCAData": base64("not used by the kit"),
                "internalRegistryPullSecret": self.node_pull_secret(NODE_PASSWORD),
                "imageRegistryBundleUserData": [
                    {"file": self.host().replace(':', ".."), "data": base64(&self.pki.ca_pem())}
                ],
            }
        })
    }

    /// `open` reached as nodes reach a production registry: this face over its storage, the
    /// ControllerConfig holding its pull secret and CA ([`SecureFace::controller_config`]), and
    /// an ImageDigestMirrorSet that sends every pull by digest of `open`'s images to this face
    /// only (`NeverContactSource`: `open` speaks plain HTTP, as no node is configured to pull).
    /// What `open` pushes or deletes, the face serves or has lost at once.
    pub async fn for_nodes(client: &kube::Client, open: &Registry) -> Result<Self> {
        let face = Self::over(open).await?;
        face.install_controller_config(client).await?;
        create(
            client,
            IMAGE_DIGEST_MIRROR_SETS,
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
                "metadata": {"name": "kit-registry"},
                "spec": {"imageDigestMirrors": [{"source": open.host(),
                    "mirrors": [face.host()], "mirrorSourcePolicy": "NeverContactSource"}]}}),
        )
        .await?;
        Ok(face)
    }

    /// Creates [`SecureFace::controller_config`] in the cluster.
    pub async fn install_controller_config(&self, client: &kube::Client) -> Result<()> {
        create(
            client,
            (
                "machineconfiguration.openshift.io",
                "v1",
                "ControllerConfig",
                "controllerconfigs",
            ),
            self.controller_config(),
        )
        .await
    }
}

fn base64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// Creates a cluster-scoped object of `kind`.
pub async fn create(client: &kube::Client, kind: Kind<'_>, object: Value) -> Result<()> {
    let api = dynamic_api(client, kind);
    let kind = kind.2;
    let object: DynamicObject = serde_json::from_value(object)?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("creating {kind} {:?}: {e}", object.metadata.name))?;
    Ok(())
}
