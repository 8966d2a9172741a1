//! `remove-finalizers` (once `release-finalizers`, still accepted): removes defer mode's
//! finalizer from every MachineOSConfig, for an uninstall. Exit status 0 none left, 1 some
//! kept, 2 error.

use std::process::ExitCode;

use crate::cli::args::RemoveFinalizersArgs;
use crate::cli::error::CliError;
use crate::cli::output;
use crate::defer::uninstall;

/// Runs `remove-finalizers`; returns the exit status (0 none left, 1 some kept, 2 error:
/// nothing could be read, or some object's finalizer could not be removed).
pub async fn remove_finalizers(args: RemoveFinalizersArgs) -> ExitCode {
    output::status(run(&args).await)
}

async fn run(args: &RemoveFinalizersArgs) -> Result<ExitCode, CliError> {
    let client = args.cluster.client().await?;
    let summary = uninstall::remove_all(&client, args.force).await?;
    print!("{}", summary.render());
    Ok(if !summary.failed.is_empty() {
        let names: Vec<&str> = summary.failed.iter().map(|(n, _)| n.as_str()).collect();
        eprintln!(
            "error: could not remove the finalizer from {} MachineOSConfig(s): {} (see above why)",
            names.len(),
            names.join(", ")
        );
        ExitCode::from(2)
    } else {
        output::exit_code(summary.complete())
    })
}

#[cfg(test)]
mod tests;
