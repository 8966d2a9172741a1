//! `prune`: the plan ([`crate::core::prune`]) for every MachineOSBuild from the live cluster or
//! a must-gather, and (live) for the images no build names ([`images`]), as text or JSON; with
//! `--apply` the deletable builds deleted on the live cluster one at a time, and with
//! `--images` too the deletable images, one digest at a time ([`crate::apply::prune`]).
//!
//! Exit status: 0 the plan was made (with `--apply`: and carried out), 1 something could not be
//! done (`--apply` stopped: a build or image changed, a delete was refused, a build did not go;
//! with `--images`, a repository could not be listed), 2 the input could not be read (as
//! `check`; also a re-read during `--apply`), 130 interrupted (Ctrl-C).

mod images;

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use crate::apply::prune::{self as apply, Done, Settings};
use crate::cli::args::{Output, PruneArgs};
use crate::cli::dump::{Source, live_only, read_source};
use crate::cli::error::CliError;
use crate::cli::notes;
use crate::cli::output::{self, Printed};
use crate::core::prune::images::ImagePlan;
use crate::core::prune::{self, Options, Plan, Report, words};

/// Runs `prune`; returns the exit status.
pub async fn prune(args: PruneArgs) -> ExitCode {
    output::status(run(&args).await)
}

fn options(args: &PruneArgs) -> Options {
    Options {
        keep: args.keep,
        keep_younger_than: args.keep_younger_than,
    }
}

async fn run(args: &PruneArgs) -> Result<ExitCode, CliError> {
    live_only(
        &args.dump,
        args.apply,
        "--apply deletes on the live cluster, and --from-dir is a copy of one: plan from the \
         dump, then run prune --apply against the cluster (it re-reads every build right before \
         its delete)",
    )?;
    live_only(
        &args.dump,
        args.images,
        "--images asks the registries with the push secret MCO uses, and a dump holds no \
         secret: run prune --images against the cluster",
    )?;
    let version = args.openshift_version.as_deref();
    let trust = "no plan can say a deletion is safe";
    let Source {
        snapshots,
        notes: mut warnings,
        client,
        ..
    } = read_source(&args.cluster, &args.dump, trust, version).await?;
    let options = options(args);
    let now = Timestamp::now();
    let plans = snapshots
        .iter()
        .map(|s| prune::plan(s, &options, now))
        .collect();
    let plan = prune::most_cautious(plans)
        .ok_or_else(|| CliError::Usage("the source holds nothing to plan from".to_string()))?;
    let (image_plan, registries) = match (&client, snapshots.first()) {
        (Some(client), Some(snapshot)) => {
            let (image_plan, registries, notes) = images::plan_live(client, snapshot).await;
            notes::warn(&notes);
            warnings.extend(notes);
            (image_plan, registries)
        }
        _ => (
            ImagePlan::skipped(
                "a dump holds no push secret, and prune asks registries only live: run prune \
                 against the cluster",
            ),
            None,
        ),
    };
    // With --images, the images are part of what was asked: a repository not listed (or no
    // registry asked at all) is something that could not be done.
    let unlisted =
        args.images && (image_plan.skipped.is_some() || image_plan.not_listed().next().is_some());
    let Some(client) = client.filter(|_| args.apply) else {
        print(args.output, &plan, &image_plan, warnings, None)?;
        if matches!(args.output, Output::Text) {
            let builds = plan.deletable().next().is_some();
            let images = !image_plan.deletable().is_empty();
            if builds || images {
                println!(
                    "Nothing was deleted: run again with --apply to delete the deletable builds, \
                     one at a time{}.",
                    if images {
                        ", and with --apply --images to delete the deletable images too"
                    } else {
                        ""
                    }
                );
            }
        }
        return Ok(output::exit_code(!unlisted));
    };
    if matches!(args.output, Output::Text) {
        print!("{}", words::text(&plan, &image_plan));
    }
    let deletable = image_plan.deletable();
    let images = registries
        .as_ref()
        .filter(|_| args.images)
        .map(|r| (deletable.as_slice(), r));
    let settings = Settings {
        options,
        version,
        timeout: args.timeout,
    };
    let done = apply::run(&client, &plan, images, settings).await;
    print(args.output, &plan, &image_plan, warnings, Some(&done))?;
    let status = done.exit_status();
    Ok(if unlisted && status == ExitCode::SUCCESS {
        ExitCode::from(1)
    } else {
        status
    })
}

fn print(
    out: Output,
    plan: &Plan,
    image_plan: &ImagePlan,
    warnings: Vec<String>,
    done: Option<&Done>,
) -> Result<(), CliError> {
    let printed = Printed {
        report: Report::new(plan, image_plan, warnings),
        done,
    };
    output::print(out, &printed, || match done {
        None => words::text(plan, image_plan),
        Some(done) => done.summary(),
    })
}
