//! `images`: every image nodes, MachineOSConfigs and succeeded builds need, and whether its
//! registry still serves it, asked where and as a node pulls it (the node's credentials, CAs,
//! proxy and mirrors). Exit status 0 every image a node or a MachineOSConfig needs is
//! available, 1 one is missing or unknown, 2 the input cannot be read.

use std::process::ExitCode;
use std::time::Duration;

use crate::access::dump::Want;
use crate::access::live;
use crate::access::registry::{self, Checker, Limits};
use crate::cli::args::{ImagesArgs, Output};
use crate::cli::dump::read_dump;
use crate::cli::error::CliError;
use crate::cli::notes;
use crate::cli::output;
use crate::core::registry::node_config::PullConfig;
use crate::core::registry::report::{self, CheckedImage};
use crate::core::registry::{NeededImage, needed_images, needed_images_of_all};

pub async fn images(args: ImagesArgs) -> ExitCode {
    output::passed(run(&args).await)
}

async fn run(args: &ImagesArgs) -> Result<bool, CliError> {
    let (needed, pull, notes) = gather(args).await?;
    notes::warn(&notes);
    let limits = Limits {
        image_timeout: Duration::from_secs(args.image_timeout.max(1)),
        ..Limits::default()
    };
    let checker = Checker::new(pull, limits);
    let specs: Vec<String> = needed.iter().map(|n| n.image.clone()).collect();
    let answers = checker.check_all(&specs).await;
    let checked: Vec<CheckedImage> = needed
        .into_iter()
        .zip(answers)
        .map(|(needed, answer)| CheckedImage {
            needed,
            verdict: answer.verdict,
            places: answer.places,
        })
        .collect();
    match args.output {
        Output::Text => print!("{}", report::text(&checked)),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&checked, &notes))?
        ),
    }
    Ok(report::passes(&checked))
}

/// The images needed (with a dump whose copies disagree, those of every combination), what a
/// node pulls with, and notes about the source.
async fn gather(
    args: &ImagesArgs,
) -> Result<(Vec<NeededImage>, PullConfig, Vec<String>), CliError> {
    match &args.dump.from_dir {
        None => {
            let client = args.cluster.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await?;
            let pull = registry::pull_config(&client).await?;
            Ok((needed_images(&snapshot), pull, notes::of_live(&missing)))
        }
        Some(dir) => {
            let loaded = read_dump(
                dir,
                args.dump.allow_incomplete,
                Want::Policy,
                "the images it lists may not be every image nodes need",
            )?;
            let mut notes = notes::of_dump(&loaded);
            let dump = registry::dump_pull_config(&loaded, dir, args.authfile.as_deref())?;
            if !dump.controller_config {
                notes.push(
                    "the dump holds no ControllerConfig: per-host CAs and the proxy are not known, \
                     so registries are asked with the system trust roots and no proxy"
                        .to_string(),
                );
            }
            if !dump.authfile {
                notes.push(
                    "no --authfile: registries are asked without credentials (a registry that \
                     needs them answers unknown)"
                        .to_string(),
                );
            }
            let pull = dump.config?;
            Ok((needed_images_of_all(loaded.snapshots()), pull, notes))
        }
    }
}
