//! `prune`: the plan ([`crate::core::prune`]) for every MachineOSBuild from the live cluster or
//! a must-gather, as text or JSON; with `--apply` ([`apply`]) the deletable builds deleted on
//! the live cluster one at a time.
//!
//! Exit status: 0 the plan was made (with `--apply`: and carried out), 1 something could not be
//! done (`--apply` stopped: a build changed, a delete was refused, a build did not go), 2 the
//! input could not be read (as `check`; also a re-read during `--apply`), 130 interrupted
//! (Ctrl-C).

mod apply;
mod outcome;

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::access::dump::Want;
use crate::access::live;
use crate::cli::args::{Output, PruneArgs};
use crate::cli::dump::read_dump;
use crate::cli::error::CliError;
use crate::cli::notes;
use crate::core::prune::{self, Options, Plan, Report, words};
use crate::core::snapshot::Snapshot;

use outcome::Applied;

/// Runs `prune`; returns the exit status.
pub async fn prune(args: PruneArgs) -> ExitCode {
    match run(&args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn options(args: &PruneArgs) -> Options {
    Options {
        keep: args.keep,
        keep_younger_than: args.keep_younger_than,
    }
}

async fn run(args: &PruneArgs) -> Result<ExitCode, CliError> {
    if args.apply && args.dump.from_dir.is_some() {
        return Err(CliError::Usage(
            "--apply deletes on the live cluster, and --from-dir is a copy of one: plan from the \
             dump, then run prune --apply against the cluster (it re-reads every build right \
             before its delete)"
                .to_string(),
        ));
    }
    let (snapshots, warnings) = gather(args).await?;
    let now = Timestamp::now();
    let plans = snapshots
        .iter()
        .map(|s| prune::plan(s, &options(args), now))
        .collect();
    let plan = prune::most_cautious(plans)
        .ok_or_else(|| CliError::Usage("the source holds nothing to plan from".to_string()))?;
    if !args.apply {
        print(args.output, &plan, warnings, None)?;
        if matches!(args.output, Output::Text) && plan.deletable().next().is_some() {
            println!(
                "Nothing was deleted: run again with --apply to delete the deletable builds, one at \
                 a time."
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if matches!(args.output, Output::Text) {
        print!("{}", words::text(&plan));
    }
    let client = args.cluster.client().await?;
    let done = apply::run(&client, &plan, args).await;
    print(args.output, &plan, warnings, Some(&done))?;
    Ok(done.exit_status())
}

/// The snapshots to plan from (one, or one per combination of a dump's disagreeing copies) and
/// the notes about the source (also on stderr).
async fn gather(args: &PruneArgs) -> Result<(Vec<Snapshot>, Vec<String>), CliError> {
    let (snapshots, notes) = match &args.dump.from_dir {
        Some(dir) => {
            let loaded = read_dump(dir, args.dump.allow_incomplete, Want::Policy)?;
            let notes = notes::of_dump(&loaded);
            (loaded.snapshots().cloned().collect::<Vec<_>>(), notes)
        }
        None => {
            let client = args.cluster.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await?;
            (vec![snapshot], notes::of_live(&missing))
        }
    };
    notes::warn(&notes);
    let version = args.openshift_version.as_deref();
    let snapshots = snapshots
        .into_iter()
        .map(|s| s.with_release_override(version))
        .collect();
    Ok((snapshots, notes))
}

/// What `--output json` prints: the plan's report, and with `--apply` what was done.
#[derive(Serialize)]
struct Printed<'a> {
    #[serde(flatten)]
    report: Report<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied: Option<&'a [Applied]>,
}

fn print(
    output: Output,
    plan: &Plan,
    warnings: Vec<String>,
    done: Option<&apply::Done>,
) -> Result<(), CliError> {
    match output {
        Output::Json => {
            let printed = Printed {
                report: Report::new(plan, warnings),
                applied: done.map(|d| d.builds.as_slice()),
            };
            println!("{}", serde_json::to_string_pretty(&printed)?);
        }
        Output::Text => match done {
            None => print!("{}", words::text(plan)),
            Some(done) => print!("{}", apply::summary(done)),
        },
    }
    Ok(())
}
