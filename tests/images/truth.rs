//! Registry truth against a real registry (distribution, behind TLS with token auth by the
//! kit's token service), asked as a node pulls: every case of the harness list, through
//! `access::registry::Checker` and through `mosc-guard images --from-dir`.
//!
//! The secure registry shares its storage with an open one, which pushes images and deletes
//! them behind the checker's back, as a retention policy would.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value, json};
use testkit::connect_proxy::ConnectProxy;
use testkit::guard::GuardBin;
use testkit::https_stub::Stub;
use testkit::node_registry::{
    NODE_PASSWORD as PASSWORD, NODE_USER as USER, PROXIED_NAME, SecureFace,
};
use testkit::registry::Registry;

use mosc_guard::access::registry::{Checker, Limits};
use mosc_guard::core::registry::Status;
use mosc_guard::core::registry::auth::{AuthFile, Credential};
use mosc_guard::core::registry::node_config::{ProxySettings, PullConfig, RegistryTrust};
use mosc_guard::core::registry::sources::{MirrorRule, merge};

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));

struct World {
    // Declared first, dropped first: the secure face before the storage it serves.
    face: SecureFace,
    open: Registry,
}

async fn world() -> World {
    let open = Registry::start().await.expect("registry");
    let face = SecureFace::over(&open).await.expect("secure registry");
    World { face, open }
}

impl World {
    /// What a node pulls with: the pull secret's entry for the secure registry, the test CA as
    /// the ControllerConfig's per-host bundle for each of `hosts`, and `mirrors`.
    fn pull(&self, password: &str, hosts: &[&str], mirrors: Vec<MirrorRule>) -> PullConfig {
        let mut per_host = BTreeMap::new();
        for h in hosts {
            per_host.insert(h.to_string(), self.face.pki.ca_pem());
        }
        PullConfig {
            auths: AuthFile::from_entries([(
                self.face.host().to_string(),
                Credential::new(USER, password),
            )]),
            trust: RegistryTrust {
                per_host,
                everywhere: None,
            },
            proxy: Default::default(),
            mirrors: merge(mirrors),
        }
    }

    async fn push(&self, repo: &str, tag: &str) -> String {
        self.open.push_image(repo, tag).await.expect("push")
    }
}

fn checker(config: PullConfig) -> Checker {
    Checker::new(
        config,
        Limits {
            request_timeout: std::time::Duration::from_secs(5),
            image_timeout: std::time::Duration::from_secs(20),
            ..Limits::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_then_deleted_behind_its_back_then_credentials_refused() {
    let w = world().await;
    let digest = w.push("ocb/os-image", "worker-1").await;
    let image = format!("{}/ocb/os-image@{digest}", w.face.host());

    let node = checker(w.pull(PASSWORD, &[w.face.host()], vec![]));
    let served = node.check(&image).await;
    assert_eq!(served.status(), Status::Available, "{served:?}");

    // Anonymous: the token service refuses, so nobody can tell.
    let mut anonymous = w.pull(PASSWORD, &[w.face.host()], vec![]);
    anonymous.auths = AuthFile::default();
    let anon = checker(anonymous).check(&image).await;
    assert_eq!(anon.status(), Status::Unknown, "{anon:?}");

    // Refused credentials are unknown, never missing, and the secret appears nowhere.
    let wrong = "WRONG-secret-4a5b6c";
    let refused = checker(w.pull(wrong, &[w.face.host()], vec![]))
        .check(&image)
        .await;
    assert_eq!(refused.status(), Status::Unknown, "{refused:?}");
    assert!(refused.verdict.why.contains("token service"), "{refused:?}");
    assert!(!format!("{refused:?}").contains(wrong));

    // Deleted by the open registry (a retention policy): the node's registry says it is gone.
    assert!(
        w.open
            .delete_manifest("ocb/os-image", &digest)
            .await
            .expect("delete")
    );
    let gone = node.check(&image).await;
    assert_eq!(gone.status(), Status::Missing, "{gone:?}");
    assert!(gone.verdict.why.contains("MANIFEST_UNKNOWN"), "{gone:?}");
    assert!(!format!("{gone:?} {served:?}").contains(PASSWORD));

    // A repository that never existed: NAME_UNKNOWN or MANIFEST_UNKNOWN, missing.
    let never = node
        .check(&format!("{}/never/pushed@{digest}", w.face.host()))
        .await;
    assert_eq!(never.status(), Status::Missing, "{never:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_cannot_tell_are_unknown() {
    let w = world().await;
    let digest = w.push("ocb/os-image", "worker-1").await;
    let registry_error =
        json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
            .to_string();
    // A web server: 404 pages everywhere.
    let web = Stub::start(
        &w.face.serving,
        404,
        &[("Content-Type", "text/html")],
        "<h1>Not Found</h1>",
    )
    .await
    .expect("stub");
    // Something that says MANIFEST_UNKNOWN to every path, /v2/ included: not a registry.
    let liar = Stub::start(
        &w.face.serving,
        404,
        &[("Content-Type", "application/json")],
        &registry_error,
    )
    .await
    .expect("stub");
    // A failing registry: 503 with the registry's header.
    let failing = Stub::start(
        &w.face.serving,
        503,
        &[("Docker-Distribution-API-Version", "registry/2.0")],
        "",
    )
    .await
    .expect("stub");
    // A hostile registry: a 5 MiB "manifest" (the bound is 4 MiB), and one that redirects to
    // itself forever.
    let huge = "x".repeat(5 << 20);
    let flood = Stub::start(
        &w.face.serving,
        200,
        &[("Docker-Distribution-API-Version", "registry/2.0")],
        &huge,
    )
    .await
    .expect("stub");
    let looping = Stub::start(&w.face.serving, 302, &[("Location", "/v2/again")], "")
        .await
        .expect("stub");
    let dead = format!("127.0.0.1:{}", testkit::net::free_port().expect("port"));
    let hosts = [
        w.face.host(),
        web.host(),
        liar.host(),
        flood.host(),
        looping.host(),
        failing.host(),
        dead.as_str(),
    ];
    let node = checker(w.pull(PASSWORD, &hosts, vec![]));
    for (what, host) in [
        ("a host that is not a registry", web.host()),
        (
            "a 404 with MANIFEST_UNKNOWN from a host whose /v2/ is no registry",
            liar.host(),
        ),
        ("a failing registry", failing.host()),
        ("nothing listening", dead.as_str()),
        ("an answer larger than a manifest may be", flood.host()),
        ("redirects without end", looping.host()),
    ] {
        let answer = node.check(&format!("{host}/ocb/os-image@{digest}")).await;
        assert_eq!(answer.status(), Status::Unknown, "{what}: {answer:?}");
    }
    let flooded = node
        .check(&format!("{}/ocb/os-image@{digest}", flood.host()))
        .await;
    assert!(flooded.verdict.why.contains("larger than"), "{flooded:?}");
    let looped = node
        .check(&format!("{}/ocb/os-image@{digest}", looping.host()))
        .await;
    assert!(looped.verdict.why.contains("redirect"), "{looped:?}");
    // A registry whose CA the node does not have: TLS fails, unknown.
    let untrusting = checker(w.pull(PASSWORD, &[], vec![]));
    let tls = untrusting
        .check(&format!("{}/ocb/os-image@{digest}", w.face.host()))
        .await;
    assert_eq!(tls.status(), Status::Unknown, "{tls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_serves_what_its_source_cannot() {
    let w = world().await;
    let digest = w.push("mirror/ocb/os-image", "copy").await;
    let dead = format!("127.0.0.1:{}", testkit::net::free_port().expect("port"));
    let image = format!("{dead}/ocb/os-image@{digest}");
    let mirror = format!("{}/mirror/ocb", w.face.host());
    let rule = |never| MirrorRule {
        source: format!("{dead}/ocb"),
        mirrors: vec![mirror.clone()],
        never_contact_source: never,
    };
    let hosts = [w.face.host(), dead.as_str()];

    let answer = checker(w.pull(PASSWORD, &hosts, vec![rule(false)]))
        .check(&image)
        .await;
    assert_eq!(answer.status(), Status::Available, "{answer:?}");
    assert_eq!(
        answer.places.len(),
        1,
        "the source is not asked once the mirror served it"
    );

    // Without the mirror rule the node asks the source only, which is not there.
    let bare = checker(w.pull(PASSWORD, &hosts, vec![]))
        .check(&image)
        .await;
    assert_eq!(bare.status(), Status::Unknown, "{bare:?}");

    w.open
        .delete_manifest("mirror/ocb/os-image", &digest)
        .await
        .expect("delete");
    // The mirror lost it and the source cannot be reached: nobody said the source lost it.
    let mirror_gone = checker(w.pull(PASSWORD, &hosts, vec![rule(false)]))
        .check(&image)
        .await;
    assert_eq!(mirror_gone.status(), Status::Unknown, "{mirror_gone:?}");
    // NeverContactSource: the mirror is the only place, and it lost the image.
    let only_mirror = checker(w.pull(PASSWORD, &hosts, vec![rule(true)]))
        .check(&image)
        .await;
    assert_eq!(only_mirror.status(), Status::Missing, "{only_mirror:?}");
}

fn b64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A must-gather-like dump: a pool, a MachineOSConfig on `image`, a node about to pull it, and
/// the ControllerConfig with the registry's CA as a per-host bundle (`..` for `:`).
fn dump(dir: &std::path::Path, image: &str, host: &str, ca: &str) {
    let objects: Vec<Value> = vec![
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
            "metadata": {"name": "worker"},
            "spec": {"machineConfigPool": {"name": "worker"}},
            "status": {"currentImagePullSpec": image}}),
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-0", "labels": {"node-role.kubernetes.io/worker": ""},
                "annotations": {"machineconfiguration.openshift.io/desiredImage": image,
                    "machineconfiguration.openshift.io/state": "Working"}}}),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {"imageRegistryBundleUserData": [{"file": host.replace(':', ".."), "data": b64(ca)}]}}),
    ];
    for (i, o) in objects.iter().enumerate() {
        std::fs::write(
            dir.join(format!("{i}.yaml")),
            serde_yaml_ng::to_string(o).expect("yaml"),
        )
        .expect("write");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_from_a_dump_with_an_authfile() {
    let w = world().await;
    let digest = w.push("ocb/os-image", "worker-1").await;
    let image = format!("{}/ocb/os-image@{digest}", w.face.host());
    let dir = tempfile::tempdir().expect("tempdir");
    let gather = dir.path().join("must-gather");
    std::fs::create_dir(&gather).expect("mkdir");
    dump(&gather, &image, w.face.host(), &w.face.pki.ca_pem());
    let authfile = dir.path().join("auth.json");
    std::fs::write(
        &authfile,
        json!({"auths": {w.face.host(): {"auth": b64(&format!("{USER}:{PASSWORD}"))}}}).to_string(),
    )
    .expect("authfile");
    let run = |extra: &[&str]| {
        let mut args = vec!["images", "--from-dir"];
        let g = gather.to_str().expect("utf-8");
        args.push(g);
        args.extend_from_slice(extra);
        BIN.cli().args(args).run()
    };
    let a = authfile.to_str().expect("utf-8");

    let ok = run(&["--authfile", a, "-o", "json"]);
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let v = ok.json();
    assert_eq!(v["images"][0]["image"], image.as_str(), "{ok:?}");
    assert_eq!(v["images"][0]["status"], "available", "{ok:?}");
    assert_eq!(v["images"][0]["neededBy"][0]["node"], "worker-0", "{ok:?}");
    assert_eq!(v["images"][0]["neededBy"][0]["need"], "pending", "{ok:?}");

    // Without credentials: unknown, exit 1.
    let anonymous = run(&["-o", "json"]);
    assert_eq!(anonymous.code, Some(1), "{anonymous:?}");
    assert_eq!(anonymous.json()["images"][0]["status"], "unknown");

    w.open
        .delete_manifest("ocb/os-image", &digest)
        .await
        .expect("delete");
    let gone = run(&["--authfile", a]);
    assert_eq!(gone.code, Some(1), "{gone:?}");
    assert!(gone.stdout.contains("MISSING"), "{gone:?}");
    assert!(gone.stdout.contains("worker-0"), "{gone:?}");
    for r in [&ok, &anonymous, &gone] {
        assert!(
            !r.stdout.contains(PASSWORD) && !r.stderr.contains(PASSWORD),
            "{r:?}"
        );
    }

    // Input that cannot be read: exit 2.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").expect("write");
    let unreadable = run(&["--authfile", bad.to_str().expect("utf-8")]);
    assert_eq!(unreadable.code, Some(2), "{unreadable:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_cluster_proxy_but_not_to_loopback() {
    let w = world().await;
    let digest = w.push("ocb/os-image", "worker-1").await;
    // A registry only the proxy can reach, by a name no DNS resolves.
    let port = w.face.host().rsplit_once(':').expect("port").1;
    let name = format!("{PROXIED_NAME}:{port}");
    let proxy = ConnectProxy::start([(name.clone(), w.face.host().to_string())].into())
        .await
        .expect("proxy");
    let mut config = w.pull(PASSWORD, &[&name], vec![]);
    config.auths = AuthFile::from_entries([(name.clone(), Credential::new(USER, PASSWORD))]);
    config.proxy = ProxySettings {
        http_proxy: None,
        https_proxy: Some(proxy.url()),
        no_proxy: Some(".cluster.local,.svc,10.0.0.0/16".into()),
    };
    let image = format!("{name}/ocb/os-image@{digest}");
    let served = checker(config).check(&image).await;
    assert_eq!(served.status(), Status::Available, "{served:?}");
    // The manifest went through the tunnel. The token service is on 127.0.0.1, which Go never
    // proxies, and this proxy refuses any name but the registry's: the token came directly.
    assert!(proxy.tunnels() >= 1, "the proxy carried the pull");
    // (NO_PROXY naming the registry would send the request directly, to a name only the proxy
    // knows: the DNS lookup that takes is left to the table tests of `proxy_for`, so that no test
    // here sends a packet off this machine.)
}

/// What `prune` reads and deletes with, against a real registry behind TLS and token auth: the
/// tags of a repository a page at a time, each resolved to its digest; a tag deleted behind its
/// back is gone; the push secret deletes (the node's pull-only credentials and a wrong password
/// may not, and nothing is deleted); a registry with deletes disabled says so and keeps the
/// image. No password appears in any answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_lists_and_deletes_with_the_push_secret_only_where_deletes_are_allowed() {
    use mosc_guard::access::registry::delete::ImageDeleter;
    use mosc_guard::access::registry::session::Session;
    use mosc_guard::access::registry::tags::TagReader;
    use mosc_guard::core::registry::deletion::DeleteAnswer;
    use mosc_guard::core::registry::listing::Resolved;
    use std::sync::Arc;
    use testkit::node_registry::{PUSH_PASSWORD, PUSH_USER};

    let w = world().await;
    let no_deletes = SecureFace::over_with(&w.open, false)
        .await
        .expect("a secure registry without deletes");
    let repo = "ocb/os-image";
    let mut pushed = Vec::new();
    for tag in ["a", "b", "c", "d", "e"] {
        pushed.push((tag.to_string(), w.push(repo, tag).await));
    }
    let session = |host: &str, user: &str, password: &str| {
        let mut config = w.pull(password, &[host], vec![]);
        config.auths =
            AuthFile::from_entries([(host.to_string(), Credential::new(user, password))]);
        if host == no_deletes.host() {
            config
                .trust
                .per_host
                .insert(host.to_string(), no_deletes.pki.ca_pem());
        }
        Arc::new(Session::new(
            config,
            Limits {
                request_timeout: std::time::Duration::from_secs(5),
                ..Limits::default()
            },
        ))
    };
    let host = w.face.host();
    let push = session(host, PUSH_USER, PUSH_PASSWORD);
    let reader = TagReader::new(Arc::clone(&push)).with_page(2);

    let mut tags = reader.list(host, repo).await.expect("listed");
    tags.sort();
    assert_eq!(tags, ["a", "b", "c", "d", "e"], "three pages of two");
    assert_eq!(
        reader.list(host, "never/pushed").await.expect("listed"),
        Vec::<String>::new(),
        "a repository that does not exist holds nothing"
    );
    // b deleted behind prune's back, after the listing: gone, the others resolve.
    let b = pushed[1].1.clone();
    assert!(w.open.delete_manifest(repo, &b).await.expect("delete"));
    let answers = reader.resolve_all(host, repo, &tags).await;
    for (answer, (tag, digest)) in answers.iter().zip(&pushed) {
        assert_eq!(&answer.tag, tag);
        if tag == "b" {
            assert!(
                matches!(&answer.resolved, Resolved::Missing(why) if why.contains("MANIFEST_UNKNOWN")),
                "{answer:?}"
            );
        } else {
            assert_eq!(
                answer.resolved,
                Resolved::Available(digest.clone()),
                "{tag}"
            );
        }
    }

    // Credentials that may not delete: nothing deleted, and said so.
    let a = pushed[0].1.clone();
    for (who, s) in [
        (
            "the nodes' pull-only credentials",
            session(host, USER, PASSWORD),
        ),
        (
            "a wrong password",
            session(host, PUSH_USER, "WRONG-push-4a5b"),
        ),
    ] {
        let refused = ImageDeleter::with_push_secret(s)
            .delete(host, repo, &a)
            .await;
        assert!(
            matches!(&refused, DeleteAnswer::Refused(_)),
            "{who}: {refused:?}"
        );
        assert!(
            !format!("{refused:?}").contains("WRONG-push-4a5b"),
            "{refused:?}"
        );
    }
    assert_eq!(
        reader.resolve(host, repo, &a).await,
        Resolved::Available(a.clone())
    );

    // A registry with deletes disabled: unsupported, nothing deleted.
    let off = no_deletes.host();
    let unsupported = ImageDeleter::with_push_secret(session(off, PUSH_USER, PUSH_PASSWORD))
        .delete(off, repo, &a)
        .await;
    assert!(
        matches!(&unsupported, DeleteAnswer::Unsupported(why) if why.contains("UNSUPPORTED")),
        "{unsupported:?}"
    );
    assert_eq!(
        reader.resolve(host, repo, &a).await,
        Resolved::Available(a.clone())
    );

    // The push secret deletes, by digest; then it is gone, and a second delete finds nothing.
    let deleter = ImageDeleter::with_push_secret(Arc::clone(&push));
    assert_eq!(deleter.delete(host, repo, &a).await, DeleteAnswer::Deleted);
    assert!(matches!(
        reader.resolve(host, repo, &a).await,
        Resolved::Missing(_)
    ));
    assert!(
        matches!(reader.resolve(host, repo, "a").await, Resolved::Missing(_)),
        "its tag went with it"
    );
    assert!(matches!(
        deleter.delete(host, repo, &a).await,
        DeleteAnswer::Missing(_)
    ));
    let mut left = reader.list(host, repo).await.expect("listed");
    left.sort();
    assert_eq!(left, ["c", "d", "e"]);
    let everything = format!("{answers:?} {unsupported:?}");
    assert!(!everything.contains(PUSH_PASSWORD) && !everything.contains(PASSWORD));
}
