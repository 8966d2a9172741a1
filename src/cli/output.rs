//! How a subcommand ends: what it found printed as text or JSON on stdout, and its exit status
//! (an error it could not run past: `error: ...` on stderr, exit status 2).

use std::process::ExitCode;

use serde::Serialize;

use crate::cli::args::Output;
use crate::cli::error::CliError;

/// What `--output json` prints: the plan's report, and with `--apply` what was done.
#[derive(Serialize)]
pub(super) struct Printed<R, D> {
    #[serde(flatten)]
    pub(super) report: R,
    #[serde(flatten)]
    pub(super) done: Option<D>,
}

/// Prints `json` pretty, or `text()`, as `output` says.
pub(super) fn print(
    output: Output,
    json: &impl Serialize,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(json)?),
        Output::Text => print!("{}", text()),
    }
    Ok(())
}

/// The exit status of a run: its own, or 2 with `error: ...` when it could not run.
pub(super) fn status(ran: Result<ExitCode, impl std::fmt::Display>) -> ExitCode {
    ran.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// The exit status of a run that passes or not: 0 passed, 1 not, 2 it could not run.
pub(super) fn passed(ran: Result<bool, CliError>) -> ExitCode {
    status(ran.map(exit_code))
}

/// 0 when `passed`, else 1.
pub(super) fn exit_code(passed: bool) -> ExitCode {
    ExitCode::from(u8::from(!passed))
}
