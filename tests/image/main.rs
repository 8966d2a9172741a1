//! The container image, run with podman. Every test here is `#[ignore]`d: plain `cargo test`
//! (and `make test`'s cargo tier) lists them as ignored, since it builds no image. The image
//! tier runs them: `make image-test` (`hack/image.sh test`) checks the prerequisites, builds
//! the image, sets `MOSC_GUARD_IMAGE` and runs them with `--include-ignored`; `make test` does
//! the same where the prerequisites hold and otherwise reports the tier as SKIPPED with the
//! reason (`hack/image.sh ci`).
//!
//! What runs, every container with the options `hack/image.sh run-options` prints (the same
//! ones its prerequisite check tries): a read-only root filesystem, all capabilities dropped,
//! no new privileges, `--runtime runc` and explicit `--ulimit`s (podman's defaults cannot be
//! applied in this sandbox), as the image's own user:
//! - the layout both Containerfiles promise: `/usr/local/bin/mosc-guard`, user 65532,
//!   entrypoint mosc-guard, command serve (`podman image inspect`);
//! - `--version`; `check --from-dir` on a fixture mounted read-only, with the exit status and
//!   the words of the binary outside the image;
//! - `serve` on the host network (127.0.0.1), its certificate, key and kubeconfig read from a
//!   read-only mount, registered with a test control plane: a real `kubectl delete` of a
//!   MachineOSConfig whose node is mid-update is refused through the container, and allowed
//!   once the pool has settled;
//! - SIGTERM (`podman kill --signal TERM`): `/readyz` answers 503 at once, connections are
//!   still served for the shutdown delay, and the container exits 0 within delay + grace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use testkit::guard::GuardBin;
use testkit::process::output_text;
use testkit::scenario::*;
use testkit::simulator::SimConfig;
use testkit::webhooks::register_validating_webhook_at;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The image under test: `MOSC_GUARD_IMAGE`, which the image tier sets.
fn image() -> String {
    match std::env::var("MOSC_GUARD_IMAGE") {
        Ok(image) if !image.is_empty() => image,
        _ => panic!(
            "MOSC_GUARD_IMAGE is not set: these tests run the built image; `make image-test` builds it and sets it"
        ),
    }
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running podman {args:?}: {e}"))
}

/// `podman run` options every container here gets (`hack/image.sh run-options`, one a line):
/// the runtime, the read-only root, the dropped capabilities, the host network, no pulls, and
/// `--ulimit`s at this process's hard limits (podman's defaults, and any value above the hard
/// limit, are refused where the sandbox lowers them: "error setting rlimit").
fn run_options() -> Vec<String> {
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("hack/image.sh"))
        .arg("run-options")
        .output()
        .expect("run hack/image.sh run-options");
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `podman run --rm <run_options> <mounts> IMAGE ARGS` to completion.
fn run(image: &str, mounts: &[String], args: &[&str]) -> Output {
    let options = run_options();
    let mut all: Vec<&str> = vec!["run", "--rm"];
    all.extend(options.iter().map(String::as_str));
    for m in mounts {
        all.extend(["-v", m.as_str()]);
    }
    all.push(image);
    all.extend_from_slice(args);
    podman(&all)
}

#[test]
#[ignore = "needs the image: `make image-test` builds it and runs these"]
fn the_image_has_the_promised_layout() {
    let image = image();
    let out = podman(&["image", "inspect", &image, "--format", "{{json .Config}}"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON config");
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/mosc-guard"]),
        "{config}"
    );
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]), "{config}");
    let size = podman(&["image", "inspect", &image, "--format", "{{.Size}}"]);
    println!(
        "image {image}: {} bytes",
        String::from_utf8_lossy(&size.stdout).trim()
    );

    let out = run(&image, &[], &["--version"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");

    // The fixture, read-only: blocked (exit 1), as the binary outside the image says.
    let fixture = Path::new(ROOT).join("tests/fixtures/must-gather-rolling");
    let mount = format!("{}:/dump:ro", fixture.display());
    for (args, code) in [
        (&["check", "worker", "--from-dir", "/dump"][..], 1),
        (
            &["check", "--all", "--from-dir", "/dump", "-o", "json"][..],
            1,
        ),
        (&["check", "nosuch", "--from-dir", "/dump"][..], 2),
    ] {
        let inside = run(&image, std::slice::from_ref(&mount), args);
        assert_eq!(
            inside.status.code(),
            Some(code),
            "{args:?}: {}",
            output_text(&inside)
        );
        let outside_args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == "/dump" {
                    fixture.display().to_string()
                } else {
                    (*a).to_owned()
                }
            })
            .collect();
        let outside = BIN.cli().args(&outside_args).run();
        assert_eq!(outside.code, Some(code), "{outside:?}");
        assert_eq!(
            String::from_utf8_lossy(&inside.stdout).replace("/dump", ""),
            outside.stdout.replace(&fixture.display().to_string(), ""),
            "{args:?}: the image's binary says what the binary says"
        );
    }
}

/// A running container, removed on Drop.
struct Container {
    name: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "--force", "--time", "0", &self.name]);
    }
}

impl Container {
    fn logs(&self) -> String {
        let out = podman(&["logs", &self.name]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The container's state ("running", "exited") and exit code.
    fn state(&self) -> (String, i64) {
        let out = podman(&[
            "inspect",
            &self.name,
            "--format",
            "{{.State.Status}} {{.State.ExitCode}}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        let mut parts = text.split_whitespace();
        (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().and_then(|c| c.parse().ok()).unwrap_or(-1),
        )
    }
}

/// Files the container reads (world-readable copies: the image's user is not the owner) in a
/// directory mounted read-only at /config: the serving certificate and key, and a kubeconfig
/// for the control plane whose paths point into /config.
fn config_dir(cluster: &Cluster) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = cluster.cp.pki();
    let serving = pki
        .server_cert("mosc-guard-image", &["127.0.0.1"])
        .expect("serving certificate");
    let admin = pki
        .client_cert("e2e-image-admin", &["system:masters"])
        .expect("client certificate");
    let copy = |from: &Path, name: &str| {
        let to = dir.path().join(name);
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    };
    copy(&serving.cert, "tls.crt");
    copy(&serving.key, "tls.key");
    copy(&admin.cert, "admin.crt");
    copy(&admin.key, "admin.key");
    copy(pki.ca_path(), "ca.crt");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority: /config/ca.crt\n\
             users:\n- name: admin\n  user:\n    client-certificate: /config/admin.crt\n    client-key: /config/admin.key\n\
             contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: admin\n\
             current-context: e2e\n",
            cluster.cp.server()
        ),
    )
    .expect("kubeconfig");
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// `serve --shutdown-delay` and `--shutdown-grace` of the container (seconds): short, so the
/// drain is seen whole, and the delay long enough to serve one request after SIGTERM.
const SHUTDOWN_DELAY: u64 = 3;
const SHUTDOWN_GRACE: u64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the image: `make image-test` builds it and runs these"]
async fn the_image_serves_the_webhook_and_drains_on_sigterm() {
    let image = image();
    let cluster = seed(SimConfig::fast()).await;
    let config = config_dir(&cluster);
    let port = testkit::net::free_port().expect("port");
    let metrics_port = testkit::net::free_port().expect("port");
    let name = format!("mosc-guard-image-test-{port}");
    let mut args: Vec<String> = vec![
        "run".into(),
        "--detach".into(),
        "--name".into(),
        name.clone(),
    ];
    args.extend(run_options());
    args.extend([
        "-v".into(),
        format!("{}:/config:ro", config.path().display()),
        "-e".into(),
        "POD_NAMESPACE=default".into(),
        "-e".into(),
        format!("POD_NAME={name}"),
        image.clone(),
        "serve".into(),
        format!("--listen=127.0.0.1:{port}"),
        format!("--metrics-listen=127.0.0.1:{metrics_port}"),
        "--tls-cert-file=/config/tls.crt".into(),
        "--tls-key-file=/config/tls.key".into(),
        "--kubeconfig=/config/kubeconfig".into(),
        "--log-format=json".into(),
        format!("--shutdown-delay={SHUTDOWN_DELAY}"),
        format!("--shutdown-grace={SHUTDOWN_GRACE}"),
    ]);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = podman(&arg_refs);
    assert!(out.status.success(), "podman run: {}", output_text(&out));
    let container = Container { name };

    let http = testkit::tls::https_client(&cluster.cp.pki().ca_pem()).expect("client");
    let base = format!("https://127.0.0.1:{port}");
    let readyz = format!("https://127.0.0.1:{metrics_port}/readyz");
    wait_for(
        || async { Ok(testkit::probe::ready(&http, &readyz).await.ok()) },
        Duration::from_secs(60),
        "the container's /readyz answering 200",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", container.logs()));
    register_validating_webhook_at(&cluster.cp, &base, &cluster.cp.pki().ca_pem())
        .await
        .expect("webhook registered");

    // Mid-rollout: refused through the container.
    let rollout = cluster
        .start_layered_rollout(STEP_TIMEOUT)
        .await
        .expect("rollout");
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    refused_mid_rollout(&out, &rollout).unwrap_or_else(|e| panic!("{e}"));
    // Settled: allowed (the container's confirming read included).
    cluster.sim.release(&rollout.node);
    wait_rolled_out(&cluster, &rollout.build.image).await;
    wait_for(
        || async { Ok(cluster.check(&BIN, "worker", &[]).code.filter(|c| *c == 0)) },
        STEP_TIMEOUT,
        "the pool settled (check worker exit 0)",
    )
    .await
    .expect("settled");
    let out = kubectl(&cluster, ["delete", "machineosconfig", "worker"]).await;
    assert!(out.success(), "{out:?}\n{}", container.logs());
    let logs = container.logs();
    assert!(
        logs.contains("\"admission decision\""),
        "JSON decision lines: {logs}"
    );
    assert!(
        logs.contains("\"result\":\"denied\"") && logs.contains("\"result\":\"allowed\""),
        "{logs}"
    );
    assert!(!logs.contains("Read-only file system"), "{logs}");

    // SIGTERM: not ready at once, still serving during the delay, gone within delay + grace.
    let killed = Instant::now();
    let out = podman(&["kill", "--signal", "TERM", &container.name]);
    assert!(out.status.success(), "{}", output_text(&out));
    wait_for(
        || async {
            Ok(testkit::probe::get(&http, &readyz)
                .await
                .filter(|(status, _)| *status == 503))
        },
        Duration::from_secs(SHUTDOWN_DELAY),
        "/readyz answering 503 after SIGTERM",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", container.logs()));
    // A new connection during the delay is still served.
    let fresh = testkit::tls::https_client(&cluster.cp.pki().ca_pem()).expect("client");
    let healthz = testkit::probe::get(&fresh, &format!("{base}/healthz")).await;
    assert_eq!(
        healthz.map(|(s, _)| s),
        Some(200),
        "served {:.1?} after SIGTERM",
        killed.elapsed()
    );
    let limit = Duration::from_secs(SHUTDOWN_DELAY + SHUTDOWN_GRACE);
    let exited = loop {
        let (status, code) = container.state();
        if status == "exited" {
            break (killed.elapsed(), code);
        }
        assert!(
            killed.elapsed() < limit + Duration::from_secs(5),
            "still {status} {:.1?} after SIGTERM:\n{}",
            killed.elapsed(),
            container.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "container exited {:?} after SIGTERM (code {})",
        exited.0, exited.1
    );
    assert_eq!(exited.1, 0, "a clean shutdown:\n{}", container.logs());
    assert!(
        exited.0 >= Duration::from_secs(SHUTDOWN_DELAY),
        "drained for the delay: {:?}",
        exited.0
    );
    assert!(
        exited.0 < limit + Duration::from_secs(2),
        "within delay + grace: {:?}",
        exited.0
    );
    let logs = container.logs();
    assert!(logs.contains("draining"), "{logs}");
    let _ = PathBuf::new();
}
