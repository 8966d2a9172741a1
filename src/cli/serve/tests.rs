use super::*;
use crate::cli::args::{Cli, Command};

/// `mosc-guard serve` with the two required flags and `extra`, as clap parses it.
fn parse(extra: &[&str]) -> Result<Cli, clap::Error> {
    use clap::Parser as _;
    let base = [
        "mosc-guard",
        "serve",
        "--tls-cert-file",
        "c",
        "--tls-key-file",
        "k",
    ];
    Cli::try_parse_from(base.iter().chain(extra))
}

fn serve_args(extra: &[&str]) -> ServeArgs {
    match parse(extra).map(|c| c.command) {
        Ok(Command::Serve(args)) => args,
        other => panic!("serve expected: {other:?}"),
    }
}

#[test]
fn client_ca_needs_a_metrics_listener_for_probes() {
    assert!(parse(&["--client-ca-file", "ca.crt"]).is_err());
    let args = serve_args(&[
        "--client-ca-file",
        "ca.crt",
        "--metrics-listen",
        "0.0.0.0:9443",
    ]);
    assert_eq!(
        args.metrics_listen,
        Some("0.0.0.0:9443".parse().expect("addr"))
    );
    assert!(parse(&["--metrics-listen", "0.0.0.0:9443"]).is_ok());
}

#[test]
fn defer_mode_needs_in_flight_and_a_live_cluster() {
    let config = |extra: &[&str]| ServeConfig::try_from(serve_args(extra)).map(|_| ());
    assert_eq!(
        config(&["--deletion-mode", "defer", "--policy", "in-use"]),
        Err(ConfigError::DeferNeedsInFlight)
    );
    assert_eq!(
        config(&["--deletion-mode", "defer", "--from-dir", "/tmp"]),
        Err(ConfigError::DeferNeedsLiveCluster)
    );
    assert_eq!(config(&["--deletion-mode", "defer"]), Ok(()));
    assert_eq!(
        config(&["--deletion-mode", "defer", "--enforcement", "warn"]),
        Err(ConfigError::WarnNeedsDenyMode)
    );
    assert_eq!(config(&["--enforcement", "warn"]), Ok(()));
    assert_eq!(
        config(&["--policy", "in-use", "--from-dir", "/tmp"]),
        Ok(())
    );
}

#[test]
fn durations_are_validated_into_the_config() {
    let c = ServeConfig::try_from(serve_args(&[
        "--request-timeout",
        "0",
        "--fence-wait-ms",
        "250",
        "--confirm-batch-window-ms",
        "0",
    ]))
    .expect("valid");
    assert_eq!(
        c.limits.request_timeout,
        Duration::from_secs(1),
        "at least a second"
    );
    assert_eq!(c.fence_wait, Duration::from_millis(250));
    assert_eq!(c.confirm_batch_window, Duration::ZERO);
    let defaults = ServeConfig::try_from(serve_args(&[])).expect("valid");
    assert_eq!(
        defaults.confirm_batch_window,
        crate::decision::coalesce::DEFAULT_BATCH_WINDOW,
        "the flag's default is the library's"
    );
    assert!(matches!(c.read_from, ReadFrom::Live(_)));
    assert!(!c.lease.identity.is_empty());
}

#[test]
fn mco_users_default_to_the_machine_os_builder_and_can_be_replaced_or_cleared() {
    let users = |extra: &[&str]| serve_args(extra).mco_users;
    assert_eq!(users(&[]), [crate::core::model::MACHINE_OS_BUILDER_USER]);
    assert_eq!(
        users(&[
            "--mco-user",
            "system:serviceaccount:mco:builder",
            "--mco-user",
            "x"
        ]),
        ["system:serviceaccount:mco:builder", "x"]
    );
    let none = ServeConfig::try_from(serve_args(&["--mco-user="])).expect("valid");
    assert!(format!("{:?}", none.mco_users).contains("McoUsers([])"));
}
