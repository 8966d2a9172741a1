//! `mosc-guard` binary: parses the command line and hands over to `cli`.

use std::process::ExitCode;

use clap::Parser;
use mosc_guard::cli::args::{Cli, Command, Output};
use mosc_guard::cli::{certs, check, images, prune, recover, serve, uninstall};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // Before any thread starts: the arena limit applies to threads created afterwards.
    mosc_guard::access::memory::tune_allocator();
    let cli = Cli::parse();
    // Logs go to stderr; `check` keeps quiet unless asked (RUST_LOG), `serve` logs at info.
    // kube's client logs connection failures itself; `check` reports them as its error.
    let default = match cli.command {
        Command::Serve(_) => "info",
        Command::Certs(_) => "warn",
        Command::Check(_)
        | Command::RemoveFinalizers(_)
        | Command::Recover(_)
        | Command::Images(_)
        | Command::Prune(_) => "warn,kube_client=off",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cli.log_format {
        Output::Json => fmt.json().init(),
        Output::Text => fmt.init(),
    }
    // kube and our server both use rustls with ring; make it the process default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::serve(args).await,
            Command::Check(args) => check::check(args).await,
            Command::Certs(args) => certs::certs(args),
            Command::RemoveFinalizers(args) => uninstall::remove_finalizers(args).await,
            Command::Recover(args) => recover::recover(args).await,
            Command::Images(args) => images::images(args).await,
            Command::Prune(args) => prune::prune(args).await,
        }
    })
}
