//! The dashboard's number: `serve` exports `mosc_guard_deletable_builds{machineosconfig}`,
//! `prune`'s plan with its defaults (`--keep 3`, `--keep-younger-than 60m`) over what it decides
//! from. Served from a dump (`serve --from-dir`), since a real API server stamps every build it
//! creates with the time now, and only builds an hour old count.

use super::*;

const WORKER: &str = "mosc_guard_deletable_builds{machineosconfig=\"worker\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_counts_the_builds_prune_would_delete_per_config() {
    let dir = testkit::temp_dir("mosc-guard-prune-gauge-").expect("temp dir");
    let pki = testkit::pki::Pki::new(&dir.path().join("pki")).expect("pki");
    let dump = dir.path().join("dump");
    std::fs::create_dir(&dump).expect("dump dir");
    // As `prune --from-dir` plans it (dumps.rs): build 1 of the five may go.
    super::dumps::write_dump(&dump, &[]);
    let guard = BIN
        .serve_offline(&pki)
        .args(&["--from-dir", dump.to_str().expect("UTF-8 path")])
        .start()
        .await
        .expect("ready");
    assert_eq!(guard.metric(WORKER).await, Some(1.0));
    let text = guard.metrics().await.expect("metrics");
    assert!(
        text.contains("# HELP mosc_guard_deletable_builds Per MachineOSConfig, MachineOSBuilds `mosc-guard prune` would delete now"),
        "{text}"
    );
}
