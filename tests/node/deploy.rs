//! Installing an overlay as an admin does, on a cluster with a real node: `kubectl apply -k` of a
//! kustomization of the test's own that names the overlay and sets the image under test (as an
//! admin's own overlay does, manifests/README.md); then what the certificate operator would do,
//! since none runs here: the serving certificate's Secret in the shape cert-manager or
//! OpenShift's service-ca writes it, and the CA injected into the webhook configurations as
//! cert-manager's cainjector or service-ca does; then `kubectl rollout status`.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use testkit::kubectl::KubectlOutput;
use testkit::manifests::manifests_dir;
use testkit::pki::CertPair;
use testkit::scenario::Cluster;
use testkit::scenario::NodeCluster;
use testkit::simulator::SimConfig;

use super::{NAME, NAMESPACE, ROLLOUT_TIMEOUT, image};

/// The overlays installed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    /// `overlays/cert-manager`: deny mode, certificates from cert-manager.
    CertManager,
    /// `overlays/openshift-defer`: defer mode, certificates from service-ca.
    OpenShiftDefer,
}

impl Overlay {
    fn dir(self) -> &'static str {
        match self {
            Self::CertManager => "overlays/cert-manager",
            Self::OpenShiftDefer => "overlays/openshift-defer",
        }
    }

    fn defer(self) -> bool {
        self == Self::OpenShiftDefer
    }

    /// The third-party CRDs its objects need (tests/crds/thirdparty: the fields the manifests
    /// use, as upstream declares them), and namespaces OpenShift would have.
    fn prerequisites(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Self::CertManager => (
                &[
                    "certificates.cert-manager.io.yaml",
                    "issuers.cert-manager.io.yaml",
                ],
                &[],
            ),
            Self::OpenShiftDefer => (
                &[
                    "servicemonitors.monitoring.coreos.com.yaml",
                    "prometheusrules.monitoring.coreos.com.yaml",
                ],
                &["openshift-config-managed"],
            ),
        }
    }
}

/// An overlay installed on a cluster with a real node, its pods Ready.
pub struct Deployed {
    pub nc: NodeCluster,
    pub overlay: Overlay,
    /// The serving certificates written so far (the last one is current).
    pub serving: Vec<CertPair>,
    _scratch: tempfile::TempDir,
}

/// Seeds a cluster (3 simulated workers, fast simulator) with a real node running the image
/// under test, installs `overlay`, writes its certificate as its operator would, and waits for
/// the rollout.
pub async fn deploy(overlay: Overlay) -> Deployed {
    let image = image();
    let nc = NodeCluster::start(3, SimConfig::fast(), &[&image])
        .await
        .unwrap_or_else(|e| panic!("a cluster with a real node: {e}"));
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut d = Deployed {
        nc,
        overlay,
        serving: Vec::new(),
        _scratch: scratch,
    };
    let (crds, namespaces) = overlay.prerequisites();
    for crd in crds {
        let path = testkit::repo_root().join("tests/crds/thirdparty").join(crd);
        d.kubectl_ok(&["apply", "-f", &path.to_string_lossy()])
            .await;
    }
    for crd in crds {
        let name = crd.trim_end_matches(".yaml");
        d.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
        ])
        .await;
    }
    for ns in namespaces {
        d.kubectl_ok(&["create", "namespace", ns]).await;
    }

    let kustomization = write_kustomization(d._scratch.path(), overlay.dir(), &image);
    d.kubectl_ok(&["apply", "-k", &kustomization.to_string_lossy()])
        .await;
    // What the certificate operator does once the objects exist: the Secret the pods mount
    // (they wait for it), then the CA into the webhook configurations.
    d.rotate_serving_certificate().await;
    d.inject_ca().await;
    d.rollout_status().await;
    d
}

/// `<dir>/kustomization.yaml` naming manifests/`overlay` (by a relative path: kustomize refuses
/// absolute ones) with the image set to `image`; returns `dir`.
fn write_kustomization(dir: &Path, overlay: &str, image: &str) -> PathBuf {
    let (name, tag) = match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, tag),
        _ => (image, "latest"),
    };
    let target = manifests_dir().join(overlay);
    let relative = relative_path(dir, &target);
    let yaml = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - {}\n\
         images:\n  - name: quay.io/mosc-guard/mosc-guard\n    newName: {name}\n    newTag: \"{tag}\"\n",
        relative.display()
    );
    std::fs::write(dir.join("kustomization.yaml"), yaml).expect("write kustomization");
    dir.to_owned()
}

/// `to` relative to `from` (both absolute, canonicalized): `../..` up to the common prefix.
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from = from.canonicalize().expect("canonical scratch dir");
    let to = to.canonicalize().expect("canonical manifests dir");
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut path = PathBuf::new();
    for c in from.components().skip(common) {
        if matches!(c, Component::Normal(_)) {
            path.push("..");
        }
    }
    for c in to.components().skip(common) {
        path.push(c);
    }
    path
}

impl Deployed {
    pub fn cluster(&self) -> &Cluster {
        &self.nc.cluster
    }

    /// kubectl as the admin (its output, whatever the exit status).
    pub async fn kubectl(&self, args: &[&str]) -> KubectlOutput {
        self.cluster()
            .cp
            .kubectl(args)
            .await
            .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"))
    }

    /// kubectl as the admin, which must succeed.
    pub async fn kubectl_ok(&self, args: &[&str]) -> KubectlOutput {
        let out = self.kubectl(args).await;
        if !out.success() {
            panic!("kubectl {args:?}: {out:?}\n{}", self.explain().await);
        }
        out
    }

    /// What an admin would look at when something is off: the pods, their events and logs,
    /// and the node's logs.
    pub async fn explain(&self) -> String {
        let mut text = String::new();
        for args in [
            &[
                "get",
                "pods,endpointslices,leases",
                "-n",
                NAMESPACE,
                "-o",
                "wide",
            ][..],
            &["describe", "pods", "-n", NAMESPACE],
            &["get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp"],
            &[
                "logs",
                "-n",
                NAMESPACE,
                "-l",
                "app.kubernetes.io/name=mosc-guard",
                "--tail=30",
                "--prefix",
            ],
        ] {
            let out = self.cluster().cp.kubectl(args).await;
            let body = match out {
                Ok(o) => format!("{}{}", o.stdout, o.stderr),
                Err(e) => e.to_string(),
            };
            text.push_str(&format!("--- kubectl {}\n{body}\n", args.join(" ")));
        }
        text.push_str(&self.nc.node.log_tails(25));
        text
    }

    /// `kubectl rollout status` of the Deployment, then its two pods Ready.
    pub async fn rollout_status(&self) {
        let timeout = format!("--timeout={}s", ROLLOUT_TIMEOUT.as_secs());
        self.kubectl_ok(&[
            "rollout",
            "status",
            "-n",
            NAMESPACE,
            &format!("deployment/{NAME}"),
            &timeout,
        ])
        .await;
    }

    /// The guard's pods that are not being deleted, by name.
    pub async fn pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.cluster().client.clone(), NAMESPACE);
        let mut pods: Vec<Pod> = api
            .list(&ListParams::default().labels("app.kubernetes.io/name=mosc-guard"))
            .await
            .expect("list the guard's pods")
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// Issues a new serving certificate (new key, same CA: cert-manager's `rotationPolicy:
    /// Always`, service-ca's renewal) and writes it into Secret mosc-guard-tls as the
    /// overlay's certificate operator would; returns it.
    pub async fn rotate_serving_certificate(&mut self) -> CertPair {
        let cp = &self.nc.cluster.cp;
        let dns = [
            "mosc-guard.mosc-guard.svc",
            "mosc-guard.mosc-guard.svc.cluster.local",
        ];
        let pair = cp
            .pki()
            .server_cert(&format!("mosc-guard-serving-{}", self.serving.len()), &dns)
            .expect("serving certificate");
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let (annotations, mut data) = match self.overlay {
            Overlay::CertManager => (
                json!({
                    "cert-manager.io/certificate-name": "mosc-guard-serving",
                    "cert-manager.io/issuer-name": "mosc-guard-ca",
                    "cert-manager.io/issuer-kind": "Issuer",
                    "cert-manager.io/issuer-group": "cert-manager.io",
                    "cert-manager.io/common-name": dns[0],
                    "cert-manager.io/alt-names": dns.join(","),
                }),
                json!({"ca.crt": ByteString(cp.pki().ca_pem().into_bytes())}),
            ),
            Overlay::OpenShiftDefer => {
                let services: Api<Service> =
                    Api::namespaced(self.nc.cluster.client.clone(), NAMESPACE);
                let uid = services
                    .get(NAME)
                    .await
                    .expect("the Service")
                    .metadata
                    .uid
                    .unwrap_or_default();
                (
                    json!({
                        "service.beta.openshift.io/originating-service-name": NAME,
                        "service.beta.openshift.io/originating-service-uid": uid,
                    }),
                    json!({}),
                )
            }
        };
        data["tls.crt"] = serde_json::to_value(ByteString(read(&pair.cert))).expect("bytes");
        data["tls.key"] = serde_json::to_value(ByteString(read(&pair.key))).expect("bytes");
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "mosc-guard-tls", "namespace": NAMESPACE, "annotations": annotations},
            "data": data,
        }))
        .expect("Secret");
        let api: Api<Secret> = Api::namespaced(self.nc.cluster.client.clone(), NAMESPACE);
        match api
            .get_opt("mosc-guard-tls")
            .await
            .expect("read the Secret")
        {
            Some(old) => {
                let mut new = secret;
                new.metadata.resource_version = old.metadata.resource_version;
                api.replace("mosc-guard-tls", &PostParams::default(), &new)
                    .await
                    .expect("replace the Secret");
            }
            None => {
                api.create(&PostParams::default(), &secret)
                    .await
                    .expect("create the Secret");
            }
        }
        self.serving.push(pair.clone());
        pair
    }

    /// Writes the CA into every webhook's `clientConfig.caBundle` (cainjector, service-ca),
    /// each write conditional on the version read.
    async fn inject_ca(&self) {
        let client = self.cluster().client.clone();
        let ca = ByteString(self.cluster().cp.pki().ca_pem().into_bytes());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let mut v = validating.get(NAME).await.expect("the validating webhooks");
        for w in v.webhooks.iter_mut().flatten() {
            w.client_config.ca_bundle = Some(ca.clone());
        }
        validating
            .replace(NAME, &PostParams::default(), &v)
            .await
            .expect("inject the CA (validating)");
        if self.overlay.defer() {
            let mutating: Api<MutatingWebhookConfiguration> = Api::all(client);
            let mut m = mutating.get(NAME).await.expect("the mutating webhook");
            for w in m.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = Some(ca.clone());
            }
            mutating
                .replace(NAME, &PostParams::default(), &m)
                .await
                .expect("inject the CA (mutating)");
        }
    }
}
