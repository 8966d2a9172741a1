//! Issue 38 item 3: the images no build names, end to end. The kit's registry behind TLS and
//! token auth ([`SecureFace`]), where the MachineOSConfig pushes (the simulator builds, pulls
//! and deletes there, as MCO reaches a production registry), the ControllerConfig with its CA,
//! MCO's push secret in `openshift-machine-config-operator`:
//!
//! - on 4.23, a build deleted while its nodes ran its image: MCO's in-use check keeps (leaks)
//!   the image; prune lists its tag, keeps it while a node runs it, and deletes it with
//!   `--apply --images` once none does; a tag pushed by hand goes at once;
//! - on 4.23, a config deleted while its nodes ran its image (the fix's own leak): nothing names
//!   the repository until a config pushes there again; then the tag is listed and deleted;
//! - refused credentials (the repository is not listed, `--images` fails, no secret printed),
//!   a tag deleted behind prune's back between its plan and its delete (nothing to do), and the
//!   builds deleted first;
//! - a registry that does not allow deletes: said, the run stops, nothing deleted.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use testkit::node_registry::{PUSH_PASSWORD, PUSH_USER, SecureFace};
use testkit::simulator::SimConfig;

use super::*;
use testkit::mco;
use testkit::release::Release;

/// The push secret the kit's MachineOSConfigs name.
const PUSH_SECRET: &str = "push-secret";

/// The registry as MCO and the nodes reach it in production: the kit's registry behind TLS and
/// token auth (deletes allowed or not), the simulator building, pulling and deleting there, the
/// ControllerConfig with its CA, and MCO's push secret.
async fn behind_tls(cluster: &Cluster, deletes: bool) -> SecureFace {
    let face = cluster
        .registry_behind_tls(deletes)
        .await
        .expect("secure registry");
    set_push_secret(cluster, &face, PUSH_PASSWORD).await;
    face
}

/// (Re)creates MCO's push secret with `password` for [`PUSH_USER`].
async fn set_push_secret(cluster: &Cluster, face: &SecureFace, password: &str) {
    let api: Api<Secret> =
        Api::namespaced(cluster.client.clone(), "openshift-machine-config-operator");
    let secret: Secret = serde_json::from_value(face.push_secret(PUSH_SECRET, PUSH_USER, password))
        .expect("a Secret");
    match api.delete(PUSH_SECRET, &DeleteParams::default()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => panic!("deleting the push secret: {e}"),
    }
    api.create(&PostParams::default(), &secret)
        .await
        .expect("push secret");
}

/// Pushes an image as `tag` of the MachineOSConfigs' repository, by hand; its digest.
async fn push_by_hand(cluster: &Cluster, tag: &str) -> String {
    cluster
        .registry
        .push_image(OCB_REPO, tag)
        .await
        .expect("push")
}

/// `images[]` of a report: (tag, deletable, reasons), by tag.
fn tags(report: &Value) -> Vec<(String, bool, Vec<String>)> {
    let mut tags: Vec<(String, bool, Vec<String>)> = report["images"]
        .as_array()
        .unwrap_or_else(|| panic!("images[]: {report:#}"))
        .iter()
        .map(|i| {
            (
                i["tag"].as_str().expect("tag").to_string(),
                i["deletable"].as_bool().expect("deletable"),
                i["reasons"]
                    .as_array()
                    .expect("reasons")
                    .iter()
                    .map(|r| r.as_str().expect("reason").to_string())
                    .collect(),
            )
        })
        .collect();
    tags.sort();
    tags
}

/// `appliedImages[]` of a report: (first tag, outcome, problem).
fn applied_images(report: &Value) -> Vec<(String, String, Option<String>)> {
    report["appliedImages"]
        .as_array()
        .unwrap_or_else(|| panic!("appliedImages[]: {report:#}"))
        .iter()
        .map(|a| {
            (
                a["tags"][0].as_str().expect("a tag").to_string(),
                a["outcome"].as_str().expect("outcome").to_string(),
                a["problem"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// `prune --keep 0 --apply --images -o json`, which must succeed; its report (the run kept in
/// `runs`).
async fn apply_images(cluster: &Cluster, runs: &mut Vec<CliRun>) -> Value {
    let run = prune(
        cluster,
        &["--keep", "0", "--apply", "--images", "-o", "json"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    runs.push(run);
    report
}

/// Whether `digest` of the MachineOSConfigs' repository is in the registry now.
async fn has(cluster: &Cluster, digest: &str) -> bool {
    cluster
        .registry
        .manifest_status(OCB_REPO, digest)
        .await
        .expect("registry")
        .is_none()
}

/// 4.23: builds A (R0) and B (R1), the pool paused before B rolls out, so every node runs A.
/// A is deleted by hand (the guard allows it: no node is on its way to A); MCO's in-use check
/// skips its image, which stays in the registry under A's tag with no build naming it. Prune
/// lists that tag and keeps it (3 nodes run it); a tag pushed by hand goes with `--apply
/// --images`. Unpaused, the nodes move to B, and the leaked image goes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_image_mco_leaks_is_kept_while_a_node_runs_it_then_deleted() {
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let face = behind_tls(&cluster, true).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let a = settle_pushing_to(&cluster, &push_spec(face.host()), &[])
        .await
        .remove(0);
    testkit::scenario::objects::set_pool_paused(&cluster.client, "worker", true)
        .await
        .expect("pause");
    render(&cluster, R1).await;
    let b = wait_new_build(&cluster, &a.image).await;

    mco::mosbs(&cluster.client)
        .delete(&a.mosb, &DeleteParams::default())
        .await
        .expect("the guard lets A go: its nodes run it, none is on its way to it");
    testkit::poll::wait_for(
        || async { Ok(cluster.sim.kept_images().contains(&a.image).then_some(())) },
        STEP_TIMEOUT,
        "MCO's in-use check to keep A's image",
    )
    .await
    .expect("A's image leaked");
    let a_digest = a.image_ref().expect("image").digest.expect("digest");
    assert!(
        has(&cluster, &a_digest).await,
        "leaked: still in the registry"
    );
    let stray = push_by_hand(&cluster, "by-hand").await;

    let mut runs = Vec::new();
    let run = prune(&cluster, &["--keep", "0", "-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    runs.push(run);
    assert_eq!(
        tags(&report),
        [
            ("by-hand".to_string(), true, vec![]),
            (a.mosb.clone(), false, vec!["nodeNeedsImage".to_string()]),
        ],
        "{report:#}"
    );
    assert!(
        report.to_string().contains("3 nodes run it (currentImage)"),
        "{report:#}"
    );
    assert_eq!(report["imageRepositories"][0]["pushSecret"], PUSH_SECRET);
    assert_eq!(report["imageRepositories"][0]["listed"], true);

    let report = apply_images(&cluster, &mut runs).await;
    assert_eq!(
        applied_images(&report),
        [("by-hand".to_string(), "deleted".to_string(), None)],
        "{report:#}"
    );
    assert!(
        !has(&cluster, &stray).await,
        "the tag pushed by hand is gone"
    );
    assert!(
        has(&cluster, &a_digest).await,
        "the image the nodes run stays"
    );

    testkit::scenario::objects::set_pool_paused(&cluster.client, "worker", false)
        .await
        .expect("unpause");
    wait_rolled_out(&cluster, &b.image).await;
    let report = apply_images(&cluster, &mut runs).await;
    assert_eq!(
        applied_images(&report),
        [(a.mosb.clone(), "deleted".to_string(), None)],
        "{report:#}"
    );
    assert!(!has(&cluster, &a_digest).await, "nothing leaked is left");
    assert!(in_registry(&cluster, &b.image).await);
    for r in &runs {
        assert!(
            !r.stdout.contains(PUSH_PASSWORD) && !r.stderr.contains(PUSH_PASSWORD),
            "{r:?}"
        );
    }
    assert_mco_never_refused(&cluster);
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// 4.23, the fix itself: MOSC worker deleted while its nodes run image A. MCO's MOSB-delete
/// path checks the nodes of the build's pool even once the config is gone, skips A and leaks
/// it. With no config and no build left, nothing names the repository: prune lists nothing
/// there. The config recreated pushing to another tag of the same repository (so its build has
/// another name and A's tag stays) names the repository again: A's tag is listed, and once no
/// node runs A, deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_4_23_the_image_left_behind_by_a_config_deleted_in_use_is_listed_once_the_repository_is_named_again()
 {
    let cluster = seed_on(Release::V4_23, SimConfig::fast()).await;
    let face = behind_tls(&cluster, true).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let watch = DegradedWatch::start(&cluster.client, "worker");
    let a = settle_pushing_to(&cluster, &push_spec(face.host()), &[])
        .await
        .remove(0);
    mco::moscs(&cluster.client)
        .delete("worker", &DeleteParams::default())
        .await
        .expect("the guard lets a settled config go");
    wait_mosc_gone(&cluster.client, "worker").await;
    testkit::poll::wait_for(
        || async { Ok(cluster.sim.kept_images().contains(&a.image).then_some(())) },
        STEP_TIMEOUT,
        "MCO's in-use check to keep A's image",
    )
    .await
    .expect("A's image leaked");
    wait_pool_reverted(&cluster).await;
    let a_digest = a.image_ref().expect("image").digest.expect("digest");
    assert!(
        has(&cluster, &a_digest).await,
        "leaked: still in the registry"
    );

    let run = prune(&cluster, &["-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(report["imageRepositories"], json!([]), "{report:#}");
    assert_eq!(
        tags(&report),
        [],
        "nothing names the repository: {report:#}"
    );

    let next = format!("{}/{OCB_REPO}:next", face.host());
    create_mosc(&cluster.client, "worker", &next)
        .await
        .expect("recreate worker");
    let n = wait_for_build(&cluster.client, "worker", STEP_TIMEOUT)
        .await
        .expect("the recreated config's build");
    assert_ne!(n.mosb, a.mosb, "another push spec, another build name");
    wait_rolled_out(&cluster, &n.image).await;
    let mut runs = Vec::new();
    let report = apply_images(&cluster, &mut runs).await;
    assert_eq!(
        tags(&report),
        [(a.mosb.clone(), true, vec![])],
        "{report:#}"
    );
    assert_eq!(
        applied_images(&report),
        [(a.mosb.clone(), "deleted".to_string(), None)],
        "{report:#}"
    );
    assert!(!has(&cluster, &a_digest).await, "nothing leaked is left");
    assert!(in_registry(&cluster, &n.image).await);
    assert_mco_never_refused(&cluster);
    assert_faithful_and_never_degraded(&cluster, &watch);
}

/// 4.20: builds A, B, C, settled on C; two tags pushed by hand. With a wrong password in the
/// push secret the repository cannot be listed: `--images` fails, and no password is printed.
/// With the right one, `--apply --images --keep 1` deletes A and B (MCO then deletes their
/// images), and then the tags: the first was deleted behind prune's back after its plan
/// (nothing to do), the second goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_and_a_tag_deleted_behind_its_back() {
    let cluster = seed_on(Release::V4_20, SimConfig::fast()).await;
    let face = behind_tls(&cluster, true).await;
    let _guard = registered_guard(&BIN, &cluster, &[]).await;
    let builds = settle_pushing_to(&cluster, &push_spec(face.host()), &[R1, R2]).await;
    let [a, b, c] = [&builds[0], &builds[1], &builds[2]];
    let s1 = push_by_hand(&cluster, "stray-1").await;
    let s2 = push_by_hand(&cluster, "stray-2").await;

    let wrong = "WRONG-push-password-77";
    set_push_secret(&cluster, &face, wrong).await;
    let run = prune(&cluster, &["--keep", "1", "--images", "-o", "json"]).await;
    assert_eq!(
        run.code,
        Some(1),
        "--images and a repository not listed: {run:?}"
    );
    let report = run.json();
    assert_eq!(
        report["imageRepositories"][0]["listed"], false,
        "{report:#}"
    );
    let why = report["imageRepositories"][0]["why"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("token service"), "{report:#}");
    assert_eq!(tags(&report), [], "{report:#}");
    let plain = prune(&cluster, &["--keep", "1"]).await;
    assert_eq!(
        plain.code,
        Some(0),
        "without --images the builds' plan stands: {plain:?}"
    );
    assert!(plain.stdout.contains("not listed"), "{plain:?}");
    for r in [&run, &plain] {
        for secret in [wrong, PUSH_PASSWORD] {
            assert!(
                !r.stdout.contains(secret) && !r.stderr.contains(secret),
                "{r:?}"
            );
        }
    }

    set_push_secret(&cluster, &face, PUSH_PASSWORD).await;
    let running = BIN
        .cli()
        .args([
            "prune",
            "--keep-younger-than",
            "0s",
            "--keep",
            "1",
            "--apply",
            "--images",
            "-o",
            "json",
        ])
        .kubeconfig(cluster.cp.kubeconfig())
        .start();
    running
        .wait_for_stderr("delete accepted; waiting", STEP_TIMEOUT)
        .await
        .expect("deleting build A");
    assert!(
        cluster
            .registry
            .delete_manifest(OCB_REPO, &s1)
            .await
            .expect("delete behind prune's back")
    );
    let run = running.finish().await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.json();
    assert_eq!(deleted(&report), mosbs(&[a, b]), "{report:#}");
    assert_eq!(
        applied_images(&report),
        [
            ("stray-1".to_string(), "nothingToDo".to_string(), None),
            ("stray-2".to_string(), "deleted".to_string(), None)
        ],
        "{report:#}"
    );
    assert!(!has(&cluster, &s2).await);
    wait_gone(&cluster, a).await;
    wait_gone(&cluster, b).await;
    assert!(in_registry(&cluster, &c.image).await);
    assert_mco_never_refused(&cluster);
}

/// A registry that does not allow deletes (distribution's default): the plan lists the tag
/// pushed by hand as deletable, and `--apply --images` says the registry does not allow
/// deletes, stops (exit 1) and deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_does_not_allow_deletes() {
    let cluster = seed_on(Release::V4_20, SimConfig::fast()).await;
    let face = behind_tls(&cluster, false).await;
    let built = settle_pushing_to(&cluster, &push_spec(face.host()), &[]).await;
    let s1 = push_by_hand(&cluster, "stray-1").await;
    let s2 = push_by_hand(&cluster, "stray-2").await;

    let run = prune(&cluster, &["-o", "json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let listed = tags(&run.json());
    assert_eq!(
        listed,
        [
            ("stray-1".to_string(), true, vec![]),
            ("stray-2".to_string(), true, vec![])
        ]
    );

    let run = prune(&cluster, &["--apply", "--images"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stdout.contains("STOPPED image")
            && run.stdout.contains("the registry does not allow deletes")
            && run.stdout.contains("NOT ATTEMPTED image"),
        "{run:?}"
    );
    assert!(has(&cluster, &s1).await && has(&cluster, &s2).await);
    assert!(in_registry(&cluster, &built[0].image).await);
    assert_mco_never_refused(&cluster);
}
