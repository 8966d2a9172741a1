//! `make demo`: the report's scenario played the way an admin would, narrated on stdout.
//!
//! A real kube-apiserver + etcd, a real registry and the MCO simulator (on 4.20) from the test kit
//! (`testkit/`), with a `worker` pool of 3 nodes. The admin opts the pool into image mode,
//! waits for the build and deletes the MachineOSConfig while the first node is updating to its
//! image (the simulator holds that node mid-update, so every run has the same timing).
//!
//! - `GUARD=on` (default): mosc-guard runs and is registered as the validating webhook. The
//!   premature delete is denied; after the rollout the same delete succeeds and the pool leaves
//!   image mode without ever degrading. Exit 0 only if all of that happened.
//! - `GUARD=defer`: mosc-guard in defer mode (validating + mutating webhooks, finalizer
//!   controller). The premature delete is accepted with a warning; the MachineOSConfig stays
//!   Terminating while the rollout finishes, then goes, and the pool never degrades.
//! - `GUARD=off`: no guard. The delete succeeds, MCO deletes the image, the node fails
//!   "manifest unknown" and the pool goes NodeDegraded. Exit 0 only if that reproduced.
//! - Anything else: usage error, exit 2.
//!
//! The harness's logs stay off the screen unless `RUST_LOG` is set (they go to stderr then).
//! The guard binary must be built first (`cargo build --bin mosc-guard`), or named by
//! `MOSC_GUARD_BIN`, see `testkit::guard::GuardBin::from_env`.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use testkit::controlplane::{ControlPlane, KubectlOutput};
use testkit::guard::GuardBin;
use testkit::mco::{self, CURRENT_IMAGE, DESIRED_IMAGE, REASON, STATE, STATE_DONE, STATE_WORKING};
use testkit::scenario::{
    Build, Cluster, OCB_REPO, mosbs_of, node_annotations, pool_condition, wait_for, wait_for_build,
};
use testkit::webhooks::{register_mutating_webhook, register_validating_webhook};

/// Bound of every wait; a passing run needs a few seconds per step at most.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
const POOL: &str = "worker";
const NODE_COUNT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    On,
    Defer,
    Off,
}

fn main() -> ExitCode {
    let mode = match std::env::var("GUARD") {
        Err(std::env::VarError::NotPresent) => Mode::On,
        Ok(v) if v == "on" => Mode::On,
        Ok(v) if v == "off" => Mode::Off,
        Ok(v) if v == "defer" => Mode::Defer,
        other => {
            let got = other.map_or_else(|e| e.to_string(), |v| format!("GUARD={v:?}"));
            eprintln!(
                "usage: make demo [GUARD=on|defer|off]   (or: GUARD=... cargo run --example demo)\n\
                 GUARD=on (default) plays the scenario with mosc-guard denying the early delete, \
                 GUARD=defer with mosc-guard deferring it, GUARD=off without mosc-guard; got {got}"
            );
            return ExitCode::from(2);
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    // On Ctrl-C the scenario future is dropped, which stops every server it started.
    let result = runtime.block_on(async {
        tokio::select! {
            r = run(mode) => r,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        }
    });
    drop(runtime);
    let took = started.elapsed().as_secs_f64();
    match result {
        Ok(Outcome { problems, summary }) if problems.is_empty() => {
            println!("\nVERDICT: PASS ({took:.1} s): {summary}");
            ExitCode::SUCCESS
        }
        Ok(Outcome { problems, .. }) => {
            println!("\nVERDICT: FAIL ({took:.1} s):");
            for p in problems {
                println!("  - {p}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("\nVERDICT: FAIL ({took:.1} s): the demo could not finish: {e}");
            println!(
                "  (RUST_LOG=info shows the harness's log; MOSC_GUARD_E2E_KEEP_DIRS=1 keeps server logs)"
            );
            ExitCode::FAILURE
        }
    }
}

/// The harness's tracing goes to stderr, off unless `RUST_LOG` says otherwise. Installed before
/// the harness's own `init_tracing`, which then finds a subscriber and does nothing.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .try_init();
}

/// How the scenario ended: empty `problems` means the expected story happened.
struct Outcome {
    problems: Vec<String>,
    summary: String,
}

impl Outcome {
    fn fail(problem: impl Into<String>) -> Self {
        Self {
            problems: vec![problem.into()],
            summary: String::new(),
        }
    }
}

async fn run(mode: Mode) -> testkit::Result<Outcome> {
    let (label, what) = match mode {
        Mode::On => ("on", "with mosc-guard"),
        Mode::Defer => ("defer", "with mosc-guard deferring the deletion"),
        Mode::Off => ("off", "without mosc-guard"),
    };
    println!(
        "mosc-guard demo (GUARD={label}): delete a MachineOSConfig while a node still needs its image, {what}"
    );
    // Fail before starting any server when the product binary is missing.
    let bin = match mode {
        Mode::Off => None,
        Mode::On | Mode::Defer => Some(GuardBin::from_env()?),
    };
    heading("Setup: kube-apiserver + etcd, a registry, the MCO 4.20 simulator, pool worker");
    let cluster = Cluster::seed(NODE_COUNT, testkit::simulator::SimConfig::fast()).await?;
    let watch = PoolWatch::start(cluster.client.clone());
    wait_for(
        || async { Ok(watch.synced().then_some(())) },
        STEP_TIMEOUT,
        "the pool watch to list the pool",
    )
    .await?;
    wait_for(
        || async { pool_settled(&cluster, None).await },
        STEP_TIMEOUT,
        "pool worker to report Updated before the scenario starts",
    )
    .await?;
    note(&format!(
        "API server {}, registry {}, {NODE_COUNT} worker nodes (MCO's timings shortened to ms)",
        cluster.cp.server(),
        cluster.registry.host()
    ));
    let guard = match mode {
        Mode::Off => None,
        Mode::On => {
            let guard = bin
                .as_ref()
                .ok_or("no binary")?
                .serve(&cluster.cp)
                .start()
                .await?;
            register_validating_webhook(&cluster.cp, &guard).await?;
            note(&format!(
                "mosc-guard serving {}, registered as rendered from manifests/base",
                guard.validate_url()
            ));
            kubectl(
                &cluster.cp,
                &["get", "validatingwebhookconfiguration"],
                None,
            )
            .await?;
            Some(guard)
        }
        Mode::Defer => {
            // The Lease goes to `default`: this control plane has no mosc-guard namespace.
            let args = ["--deletion-mode", "defer", "--lease-namespace", "default"];
            let guard = bin
                .ok_or("no binary")?
                .serve(&cluster.cp)
                .args(&args)
                .start()
                .await?;
            register_validating_webhook(&cluster.cp, &guard).await?;
            register_mutating_webhook(&cluster.cp, &guard).await?;
            note(&format!(
                "mosc-guard --deletion-mode defer serving {}, both webhooks registered as rendered from manifests/overlays/defer",
                guard.base_url()
            ));
            kubectl(
                &cluster.cp,
                &[
                    "get",
                    "validatingwebhookconfiguration,mutatingwebhookconfiguration",
                ],
                None,
            )
            .await?;
            Some(guard)
        }
    };
    pool_line(&cluster.client).await?;
    let result = scenario(mode, &cluster, &watch).await;
    watch.stop();
    match (result, &guard) {
        (Err(e), Some(guard)) => Err(format!(
            "{e}\nlast lines of the mosc-guard log:\n{}",
            guard.log_tail(15)
        )
        .into()),
        (result, _) => result,
    }
}

/// Steps 1-4 of the report, then what follows with or without the guard.
async fn scenario(mode: Mode, cluster: &Cluster, watch: &PoolWatch) -> testkit::Result<Outcome> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    let node = cluster.nodes[0].clone();

    heading("Step 1: opt pool worker into image mode");
    // The simulator freezes the first node's daemon once it is told to update, so the delete
    // below always lands while that node is mid-update (on a real cluster: a window of minutes).
    cluster.sim.hold(&node);
    let manifest = mosc_manifest(&cluster.push_spec());
    let out = kubectl(cp, &["apply", "-f", "-"], Some(&manifest)).await?;
    if !out.success() {
        return Ok(Outcome::fail("kubectl apply of the MachineOSConfig failed"));
    }
    if mode == Mode::Defer {
        let finalizers = [
            "get",
            "machineosconfig",
            POOL,
            "-o",
            "jsonpath={.metadata.finalizers}",
        ];
        let out = kubectl(cp, &finalizers, None).await?;
        if !out.stdout.contains("mosc-guard.dev/wait-for-rollout") {
            return Ok(Outcome::fail(
                "the mutating webhook did not add the finalizer",
            ));
        }
    }

    heading("Step 2: wait for the MachineOSBuild to succeed");
    let build = wait_for_build(client, POOL, STEP_TIMEOUT).await?;
    kubectl(cp, &["get", "machineosbuilds"], None).await?;

    heading("Step 3: wait until the first node starts updating to the new image");
    wait_for(
        || async {
            let a = node_annotations(client, &node).await?;
            let working = a.get(STATE).map(String::as_str) == Some(STATE_WORKING);
            let updating = pool_condition(client, POOL, "Updating")
                .await?
                .is_some_and(|c| c.is_true());
            Ok((working && updating && a.get(DESIRED_IMAGE) == Some(&build.image)).then_some(()))
        },
        STEP_TIMEOUT,
        &format!(
            "{node} to be Working with desiredImage {} and pool worker Updating",
            build.image
        ),
    )
    .await?;
    kubectl(cp, &["get", "nodes", "-o", NODE_COLUMNS], None).await?;
    note(&format!(
        "{node}: desiredImage {}, not booted yet",
        short_image(&build.image)
    ));
    pool_line(client).await?;

    heading("Step 4: delete the MachineOSConfig at once");
    let out = match mode {
        // kubectl would otherwise wait until the object is really gone.
        Mode::Defer => {
            kubectl(
                cp,
                &["delete", "machineosconfig", POOL, "--wait=false"],
                None,
            )
            .await?
        }
        _ => kubectl(cp, &["delete", "machineosconfig", POOL], None).await?,
    };
    match mode {
        Mode::On => guarded(cluster, watch, &node, &build, &out).await,
        Mode::Defer => deferred(cluster, watch, &node, &build, &out).await,
        Mode::Off => unguarded(cluster, watch, &node, &build, &out).await,
    }
}

/// GUARD=on after the premature delete: it must have been denied naming the node; then the
/// rollout finishes, the delete goes through, and the pool leaves image mode, never degrading.
async fn guarded(
    cluster: &Cluster,
    watch: &PoolWatch,
    node: &str,
    build: &Build,
    premature: &KubectlOutput,
) -> testkit::Result<Outcome> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    if premature.success() {
        return Ok(Outcome::fail(
            "the premature `kubectl delete machineosconfig worker` succeeded: mosc-guard did not deny it",
        ));
    }
    let mut problems = Vec::new();
    if !premature.stderr.contains("denied the request") || !premature.stderr.contains(node) {
        problems.push(format!(
            "the premature delete failed, but not with a denial naming {node}: {}",
            premature.stderr.trim()
        ));
    }
    if mco::moscs(client).get_opt(POOL).await?.is_none() {
        return Ok(Outcome::fail(
            "kubectl delete failed, yet MachineOSConfig worker is gone",
        ));
    }
    if !build_and_image_kept(cluster, build).await? {
        problems.push("after the denial the build or its image is gone".to_owned());
    }
    note("denied: the MachineOSConfig, its build and its image stay");
    pool_line(client).await?;

    heading("Step 5: the admin waits until the rollout finished (UPDATED=True)");
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update; the nodes update one at a time"
    ));
    wait_for(
        || async { pool_settled(cluster, Some(&build.image)).await },
        STEP_TIMEOUT,
        "every worker Done on the image and pool worker Updated",
    )
    .await?;
    kubectl(cp, &["get", "nodes", "-o", NODE_COLUMNS], None).await?;
    pool_line(client).await?;
    // The guard decides denials from its watch caches; give them the moment they need to see
    // the last node Done (a server-side dry run has no side effects).
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        || async {
            match mco::moscs(client).delete(POOL, &dry_run).await {
                Ok(_) => Ok(Some(())),
                Err(e) => Err(e.into()),
            }
        },
        STEP_TIMEOUT,
        "mosc-guard to allow a dry-run delete of MachineOSConfig worker",
    )
    .await?;

    heading("Step 6: delete the MachineOSConfig again; the pool leaves image mode");
    let out = kubectl(cp, &["delete", "machineosconfig", POOL], None).await?;
    if !out.success() {
        problems.push(format!(
            "the delete after the rollout failed: {}",
            out.stderr.trim()
        ));
        return Ok(Outcome {
            problems,
            summary: String::new(),
        });
    }
    let updates = left_image_mode(cluster, watch, build, &mut problems).await?;
    Ok(Outcome {
        problems,
        summary: format!(
            "mosc-guard denied the premature delete (naming {node}) and allowed it after the \
             rollout; pool worker was never Degraded ({updates} pool states watched) and ends Updated."
        ),
    })
}

/// After the real deletion: MCO deletes the image and the build and the pool reverts to the
/// base OS image, never Degraded. Adds what went wrong to `problems`; returns how many pool
/// states the watch saw.
async fn left_image_mode(
    cluster: &Cluster,
    watch: &PoolWatch,
    build: &Build,
    problems: &mut Vec<String>,
) -> testkit::Result<usize> {
    let client = &cluster.client;
    image_and_build_gone(cluster, build).await?;
    note(&format!(
        "MCO deleted {} from the registry and MachineOSBuild {}",
        short_image(&build.image),
        build.mosb
    ));
    wait_for(
        || async { pool_settled(cluster, None).await },
        STEP_TIMEOUT,
        "every worker back on the base OS image and pool worker Updated",
    )
    .await?;
    note("the nodes rebased to the base OS image; none needed the deleted image");
    pool_line(client).await?;

    let seen = watch.snapshot();
    if let Some(degraded) = &seen.degraded {
        problems.push(format!(
            "pool worker was Degraded at some point: {degraded}"
        ));
    }
    if seen.relists > 0 {
        problems.push(format!(
            "the pool watch re-listed {} time(s), so a transient Degraded may have been missed",
            seen.relists
        ));
    }
    let updated = pool_condition(client, POOL, "Updated").await?;
    if !updated.as_ref().is_some_and(|c| c.is_true()) {
        problems.push(format!("pool worker does not end Updated: {updated:?}"));
    }
    Ok(seen.updates)
}

/// GUARD=defer after the premature delete: accepted with a warning naming the node; the
/// MachineOSConfig stays Terminating (image and build kept) until the rollout finished, then
/// mosc-guard releases it and the pool leaves image mode, never degrading.
async fn deferred(
    cluster: &Cluster,
    watch: &PoolWatch,
    node: &str,
    build: &Build,
    premature: &KubectlOutput,
) -> testkit::Result<Outcome> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    if !premature.success() {
        return Ok(Outcome::fail(format!(
            "in defer mode the delete was refused: {}",
            premature.stderr.trim()
        )));
    }
    let mut problems = Vec::new();
    if !premature.stderr.contains("deferred") || !premature.stderr.contains(node) {
        problems.push(format!(
            "the delete went through without a deferral warning naming {node}: {}",
            premature.stderr.trim()
        ));
    }
    let held = mco::moscs(client).get_opt(POOL).await?;
    if held.is_none_or(|m| m.metadata.deletion_timestamp.is_none()) {
        return Ok(Outcome::fail(
            "MachineOSConfig worker is not Terminating after the deferred delete",
        ));
    }
    if !build_and_image_kept(cluster, build).await? {
        problems.push("after the deferred delete the build or its image is gone".to_owned());
    }
    kubectl(cp, &["get", "machineosconfig", "-o", MOSC_COLUMNS], None).await?;
    note("deferred: Terminating, held by the finalizer; its build and its image stay");

    heading(
        "Step 5: nobody acts; MCO finishes the rollout, then mosc-guard lets the deletion complete",
    );
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update; the nodes update one at a time"
    ));
    let started = Instant::now();
    wait_for(
        || async {
            Ok(mco::moscs(client)
                .get_opt(POOL)
                .await?
                .is_none()
                .then_some(()))
        },
        STEP_TIMEOUT,
        "mosc-guard to release MachineOSConfig worker",
    )
    .await?;
    note(&format!(
        "MachineOSConfig worker gone {:.1} s after the node resumed",
        started.elapsed().as_secs_f64()
    ));
    kubectl(
        cp,
        &["get", "events", "-n", "default", "-o", EVENT_COLUMNS],
        None,
    )
    .await?;
    let updates = left_image_mode(cluster, watch, build, &mut problems).await?;
    Ok(Outcome {
        problems,
        summary: format!(
            "mosc-guard accepted the premature delete with a warning naming {node}, held the \
             MachineOSConfig until the rollout finished and then let it go; pool worker was never \
             Degraded ({updates} pool states watched) and ends Updated."
        ),
    })
}

/// GUARD=off after the premature delete: it goes through, MCO deletes the image, and the held
/// node, once it resumes, fails "manifest unknown": the pool goes NodeDegraded.
async fn unguarded(
    cluster: &Cluster,
    watch: &PoolWatch,
    node: &str,
    build: &Build,
    premature: &KubectlOutput,
) -> testkit::Result<Outcome> {
    let (cp, client) = (&cluster.cp, &cluster.client);
    if !premature.success() {
        return Ok(Outcome::fail(format!(
            "without the guard, kubectl delete failed: {}",
            premature.stderr.trim()
        )));
    }
    image_and_build_gone(cluster, build).await?;
    note(&format!(
        "MCO deleted {} from the registry and MachineOSBuild {}",
        short_image(&build.image),
        build.mosb
    ));

    heading("Step 5: the node mid-update tries to pull the deleted image");
    cluster.sim.release(node);
    note(&format!(
        "{node} resumes its update (MCO retries ~75 s; here ~1 s)"
    ));
    let degraded = wait_for(
        || async {
            Ok(pool_condition(client, POOL, "NodeDegraded")
                .await?
                .filter(|c| c.is_true()))
        },
        STEP_TIMEOUT,
        "pool worker to report NodeDegraded=True",
    )
    .await?;
    let reason_path = format!("jsonpath={{.metadata.annotations.{}}}", escape_key(REASON));
    let out = kubectl(cp, &["get", "node", node, "-o", &reason_path], None).await?;
    pool_line(client).await?;
    note(&format!(
        "NodeDegraded: {}; MCO 4.20 does not recover from this by itself",
        degraded.reason
    ));

    let mut problems = Vec::new();
    if !out.stdout.contains("manifest unknown") {
        problems.push(format!(
            "{node}'s reason does not say \"manifest unknown\": {}",
            out.stdout.trim()
        ));
    }
    if !degraded.message.contains("manifest unknown") {
        problems.push(format!(
            "pool worker's NodeDegraded message does not say \"manifest unknown\": {}",
            degraded.message
        ));
    }
    if watch.snapshot().degraded.is_none() {
        problems.push("the pool watch never saw the pool Degraded".to_owned());
    }
    Ok(Outcome {
        problems,
        summary: format!(
            "the report reproduced without mosc-guard: the delete went through, the image was \
             deleted and pool worker went NodeDegraded ({node}: \"manifest unknown\")."
        ),
    })
}

/// `kubectl get machineosconfig -o` columns: name, deletion timestamp and finalizers.
const MOSC_COLUMNS: &str = "custom-columns=NAME:.metadata.name,DELETING-SINCE:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers";

/// `kubectl get events -o` columns: reason, object and message.
const EVENT_COLUMNS: &str =
    "custom-columns=REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message";

/// `kubectl get nodes -o` columns: name and MCO state.
const NODE_COLUMNS: &str = r"custom-columns=NAME:.metadata.name,STATE:.metadata.annotations.machineconfiguration\.openshift\.io/state";

/// A MOSC for pool worker pushing to `push_spec`, as an admin would write it.
fn mosc_manifest(push_spec: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\n\
         kind: MachineOSConfig\n\
         metadata:\n  name: {POOL}\n\
         spec:\n  machineConfigPool: {{name: {POOL}}}\n\
         \x20 imageBuilder: {{imageBuilderType: Job}}\n\
         \x20 renderedImagePushSecret: {{name: push-secret}}\n\
         \x20 renderedImagePushSpec: {push_spec}\n\
         \x20 containerFile:\n\
         \x20 - containerfileArch: NoArch\n\
         \x20   content: |\n\
         \x20     FROM configs AS final\n\
         \x20     RUN dnf install -y cowsay && dnf clean all\n"
    )
}

/// Whether the build's image is still in the registry and a MachineOSBuild of MOSC worker
/// still exists.
async fn build_and_image_kept(cluster: &Cluster, build: &Build) -> testkit::Result<bool> {
    let image = build.image_ref()?;
    let digest = image
        .digest
        .clone()
        .ok_or("the build's image has no digest")?;
    let image_kept = cluster
        .registry
        .manifest_status(&image.repo, &digest)
        .await?
        .is_none();
    Ok(image_kept && !mosbs_of(&cluster.client, POOL).await?.is_empty())
}

/// Waits until the registry answers "manifest unknown" for the build's image and no
/// MachineOSBuild of MOSC worker is left.
async fn image_and_build_gone(cluster: &Cluster, build: &Build) -> testkit::Result<()> {
    let image = build.image_ref()?;
    let digest = image
        .digest
        .clone()
        .ok_or("the build's image has no digest")?;
    wait_for(
        || async {
            let gone = cluster
                .registry
                .manifest_status(&image.repo, &digest)
                .await?
                .is_some();
            let builds = mosbs_of(&cluster.client, POOL).await?;
            Ok((gone && builds.is_empty()).then_some(()))
        },
        STEP_TIMEOUT,
        "MCO to delete the build's image and the MachineOSBuild",
    )
    .await
}

/// `Some(())` once every worker is Done with desiredImage = currentImage = `image` (`None`: no
/// image annotations) and pool worker is Updated with every machine updated.
async fn pool_settled(cluster: &Cluster, image: Option<&str>) -> testkit::Result<Option<()>> {
    for node in &cluster.nodes {
        let a = node_annotations(&cluster.client, node).await?;
        let get = |k: &str| a.get(k).map(String::as_str).filter(|v| !v.is_empty());
        if get(STATE) != Some(STATE_DONE)
            || get(DESIRED_IMAGE) != image
            || get(CURRENT_IMAGE) != image
        {
            return Ok(None);
        }
    }
    let pool = mco::mcps(&cluster.client).get(POOL).await?;
    let updated = condition_status(&pool, "Updated") == "True";
    let count = |k: &str| pool_count(&pool, k);
    Ok((updated && count("updatedMachineCount") == NODE_COUNT.to_string()).then_some(()))
}

/// Runs kubectl as the admin and prints the command and what it printed (indented).
async fn kubectl(
    cp: &ControlPlane,
    args: &[&str],
    stdin: Option<&str>,
) -> testkit::Result<KubectlOutput> {
    let shown: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    match stdin {
        Some(input) => println!("$ kubectl {} <<EOF\n{}EOF", shown.join(" "), input),
        None => println!("$ kubectl {}", shown.join(" ")),
    }
    let out = cp.kubectl_with_stdin(args, stdin).await?;
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        println!("    {line}");
    }
    if !out.success() {
        match out.status.code() {
            Some(code) => println!("    (kubectl exited with status {code})"),
            None => println!("    (kubectl {})", out.status),
        }
    }
    Ok(out)
}

/// Prints pool worker's state the way `kubectl get mcp worker` shows it.
async fn pool_line(client: &kube::Client) -> testkit::Result<()> {
    let pool = mco::mcps(client).get(POOL).await?;
    println!(
        "  pool worker: UPDATED={} UPDATING={} DEGRADED={}  machines {}, ready {}, updated {}, degraded {}",
        condition_status(&pool, "Updated"),
        condition_status(&pool, "Updating"),
        condition_status(&pool, "Degraded"),
        pool_count(&pool, "machineCount"),
        pool_count(&pool, "readyMachineCount"),
        pool_count(&pool, "updatedMachineCount"),
        pool_count(&pool, "degradedMachineCount"),
    );
    Ok(())
}

fn condition_status<'a>(obj: &'a DynamicObject, type_: &str) -> &'a str {
    mco::condition(obj, type_)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("-")
}

fn pool_count(pool: &DynamicObject, key: &str) -> String {
    pool.data
        .get("status")
        .and_then(|s| s.get(key))
        .map_or_else(|| "-".to_owned(), Value::to_string)
}

fn heading(text: &str) {
    println!("\n== {text}");
}

fn note(text: &str) {
    println!("  # {text}");
}

/// `<host>/<OCB_REPO>@sha256:<hex>` as `.../ocb-image@sha256:<12 hex>`.
fn short_image(image: &str) -> String {
    let name = OCB_REPO.rsplit('/').next().unwrap_or(OCB_REPO);
    match image.split_once("@sha256:") {
        Some((_, hex)) => format!(".../{name}@sha256:{}", &hex[..hex.len().min(12)]),
        None => image.to_owned(),
    }
}

/// An annotation key in a kubectl JSONPath (dots escaped).
fn escape_key(key: &str) -> String {
    key.replace('.', r"\.")
}

/// Quotes an argument for display as a shell word when it needs it.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// What a watch on pool worker saw: every status the pool had, as the API server stored it.
#[derive(Clone, Default)]
struct Seen {
    /// Objects observed (initial list and every change).
    updates: usize,
    /// The first Degraded/NodeDegraded=True observed, with its reason and message.
    degraded: Option<String>,
    /// Whether the initial list finished.
    synced: bool,
    /// Re-lists after the first: the watch was interrupted and may have missed states.
    relists: usize,
}

struct PoolWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PoolWatch {
    fn start(client: kube::Client) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={POOL}"));
            let mut events = watcher(mco::mcps(&client), config)
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(mut seen) = shared.lock() else { return };
                match event {
                    Ok(watcher::Event::Apply(pool) | watcher::Event::InitApply(pool)) => {
                        seen.updates += 1;
                        if seen.degraded.is_none() {
                            seen.degraded = degraded(&pool);
                        }
                    }
                    Ok(watcher::Event::Init) if seen.synced => seen.relists += 1,
                    Ok(watcher::Event::InitDone) => seen.synced = true,
                    Ok(_) => {}
                    Err(e) => tracing::warn!("pool watch: {e}"),
                }
            }
        });
        Self { seen, task }
    }

    fn snapshot(&self) -> Seen {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn synced(&self) -> bool {
        self.snapshot().synced
    }

    fn stop(&self) {
        self.task.abort();
    }
}

/// `Some("<type>: <reason> <message>")` when Degraded or NodeDegraded is True.
fn degraded(pool: &DynamicObject) -> Option<String> {
    ["NodeDegraded", "Degraded"].iter().find_map(|t| {
        let c = mco::condition(pool, t)?;
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
        (text("status") == "True").then(|| format!("{t}: {} {}", text("reason"), text("message")))
    })
}
