//! `release-finalizers`: removes defer mode's finalizer from every MachineOSConfig, for an
//! uninstall. Exit status 0 none left, 1 some kept, 2 error.

use std::process::ExitCode;

use crate::cli::args::ReleaseArgs;
use crate::cli::error::CliError;
use crate::defer::release;

/// Runs `release-finalizers`; returns the exit status (0 none left, 1 some kept, 2 error:
/// nothing could be read, or some object could not be released).
pub async fn release_finalizers(args: ReleaseArgs) -> ExitCode {
    let result = async {
        let client = args.cluster.client().await?;
        Ok::<_, CliError>(release::release_all(&client, args.force).await?)
    }
    .await;
    match result {
        Ok(summary) => {
            print!("{}", summary.render());
            if !summary.failed.is_empty() {
                let names: Vec<&str> = summary.failed.iter().map(|(n, _)| n.as_str()).collect();
                eprintln!(
                    "error: could not release {} MachineOSConfig(s): {} (see above why)",
                    names.len(),
                    names.join(", ")
                );
                ExitCode::from(2)
            } else if summary.complete() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
