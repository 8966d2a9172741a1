//! Errors, exit 2 with the reason on stderr: missing targets, a missing directory, bad arguments,
//! an unreachable API server or a bad kubeconfig.

use super::*;

#[test]
fn missing_targets_are_errors() {
    for target in ["mosb/worker-0000000000", "machineosconfig/infra", "infra"] {
        let run = check("must-gather-rolling", target, &[]);
        assert_eq!(run.code, Some(2), "{target}: {run:?}");
        let name = target.rsplit('/').next().unwrap_or(target);
        assert!(run.stderr.contains(name), "{target}: {run:?}");
        assert!(run.stderr.contains("not found"), "{target}: {run:?}");
        assert_eq!(run.stdout, "", "no verdict for a missing target");
    }
}

#[test]
fn missing_directory_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-must-gather");
    let run = check_dir(&missing, "worker", &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("no-such-must-gather"), "{run:?}");
    assert!(
        run.stderr.contains("No such file or directory"),
        "OS reason: {run:?}"
    );
    assert_eq!(run.stdout, "", "{run:?}");
}

#[test]
fn bad_arguments_are_errors() {
    let run = check("settled-lists", "worker", &["--policy", "sometimes"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("sometimes"), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");

    let run = check("settled-lists", "pod/x", &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("pod"), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");

    let run = check("settled-lists", "worker", &["--output", "yaml"]);
    assert_eq!(run.code, Some(2), "{run:?}");
}

#[test]
fn an_unreachable_api_server_or_a_bad_kubeconfig_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Port 1 on loopback: nothing listens, so the connection is refused at once.
    let unreachable = dir.path().join("unreachable.kubeconfig");
    fs::write(
        &unreachable,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: c, context: {cluster: k, user: u}}]\n",
    )
    .expect("write kubeconfig");
    let garbage = dir.path().join("garbage.kubeconfig");
    fs::write(&garbage, "{ not: [yaml").expect("write kubeconfig");
    for (path, want) in [
        (&unreachable, "error: listing"),
        (&garbage, "error: loading kubeconfig"),
    ] {
        let path = path.to_str().expect("UTF-8 path");
        let run = mosc_guard(&["check", "worker", "--kubeconfig", path]);
        assert_eq!(run.code, Some(2), "{run:?}");
        assert!(run.stderr.starts_with(want), "{run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
    }
}
