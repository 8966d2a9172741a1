//! `recover [POOL]`: the recovery plan ([`crate::core::recovery`]) from the live cluster or a
//! must-gather and what the registry says of each stuck node's image ([`registry`]), as text or
//! JSON; with `--apply` the plan carried out on the live cluster one node at a time, and with
//! `--wait` the pools followed to the end ([`crate::apply::recover`]).
//!
//! Exit status: 0 nothing needs a person, 1 some node does (`needsAttention` is not empty, which
//! includes a node `--apply` stopped at), 2 the input could not be read (as `check`) or a write
//! failed, 130 interrupted (Ctrl-C).

use std::process::ExitCode;

use crate::access::dump::Want;
use crate::access::recovery as live;
use crate::apply::recover::{self as apply, Done, Entry};
use crate::cli::args::{Output, RecoverArgs};
use crate::cli::dump::{live_only, read_dump};
use crate::cli::error::CliError;
use crate::cli::notes;
use crate::cli::output::{self, Printed};
use crate::core::recovery::report::{Attention, Report};
use crate::core::recovery::{self, Plan, RecoverySnapshot, words};

use crate::access::registry::RegistryAsk;

pub async fn recover(args: RecoverArgs) -> ExitCode {
    output::status(run(&args).await)
}

async fn run(args: &RecoverArgs) -> Result<ExitCode, CliError> {
    live_only(
        &args.dump,
        args.apply,
        "--apply writes to the live cluster, and --from-dir is a copy of one: plan from the dump, \
         then run recover --apply against the cluster (it re-reads every node right before its \
         patch)",
    )?;
    let (snapshots, mut warnings, place, mut registry) = gather(args).await?;
    if let Some(pool) = &args.pool {
        check_pool(&snapshots, pool, place)?;
    }
    let pool = args.pool.as_deref();
    let images = snapshots
        .iter()
        .flat_map(|s| recovery::images_to_ask(s, pool))
        .collect();
    let (answers, note) = registry.answers(&images).await;
    if let Some(note) = note {
        notes::warn(std::slice::from_ref(&note));
        warnings.push(note);
    }
    let plans = snapshots.iter().map(|s| recovery::plan(s, pool, &answers));
    let plan = recovery::most_cautious(plans);
    let mut report = Report::new(&plan, pool, warnings);
    if !args.apply {
        print(args.output, &report, None, &plan)?;
        if matches!(args.output, Output::Text) && plan.recoverable().next().is_some() {
            println!(
                "Nothing was written: run again with --apply to cancel the recoverable nodes' targets."
            );
        }
        return Ok(output::exit_code(report.needs_attention.is_empty()));
    }
    if matches!(args.output, Output::Text) {
        print!("{}", words::text(&plan));
    }
    let client = args.cluster.client().await?;
    let done = apply::run(&client, &plan, args.timeout, args.wait, &mut registry).await;
    report
        .needs_attention
        .extend(done.nodes.iter().filter_map(stopped));
    print(args.output, &report, Some(&done), &plan)?;
    Ok(done.exit_status(!report.needs_attention.is_empty()))
}

/// The readings to plan from (one, or one per combination of a dump's disagreeing copies), the
/// notes about the source (also on stderr), the source's name, and how its registry is asked.
async fn gather(
    args: &RecoverArgs,
) -> Result<(Vec<RecoverySnapshot>, Vec<String>, String, RegistryAsk), CliError> {
    let verified = args.image_loss_verified;
    let (snapshots, notes, place, registry) = match &args.dump.from_dir {
        Some(dir) => {
            let loaded = read_dump(
                dir,
                args.dump.allow_incomplete,
                Want::Recovery,
                "no plan can say a cancel is safe",
            )?;
            let extra = loaded.recovery.as_ref();
            let snapshots = loaded
                .snapshots()
                .map(|objects| RecoverySnapshot {
                    objects: objects.clone(),
                    nodes: extra.map(|e| e.nodes.clone()).unwrap_or_default(),
                    machine_configs: extra.and_then(|e| e.machine_configs.clone()),
                    disagreeing: extra.map(|e| e.disagreeing.clone()).unwrap_or_default(),
                })
                .collect();
            let registry = RegistryAsk::dump(&loaded, dir, args.authfile.as_deref(), verified)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            let notes = notes::of_dump(&loaded);
            (snapshots, notes, dir.display().to_string(), registry)
        }
        None => {
            let client = args.cluster.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await?;
            (
                vec![snapshot],
                notes::of_live(&missing),
                "the cluster".to_string(),
                RegistryAsk::live(client, verified),
            )
        }
    };
    notes::warn(&notes);
    Ok((snapshots, notes, place, registry))
}

/// `recover POOL` names a pool the source holds.
fn check_pool(snapshots: &[RecoverySnapshot], pool: &str, place: String) -> Result<(), CliError> {
    let pools: Vec<String> = (snapshots.iter().take(1))
        .flat_map(|s| &s.objects.pools)
        .map(|p| p.name().to_string())
        .collect();
    if pools.iter().any(|p| p == pool) {
        return Ok(());
    }
    Err(CliError::PoolNotFound {
        name: pool.to_string(),
        place,
        pools,
    })
}

fn print(out: Output, report: &Report, done: Option<&Done>, plan: &Plan) -> Result<(), CliError> {
    let printed = Printed { report, done };
    output::print(out, &printed, || match done {
        None => words::text(plan),
        Some(done) => done.summary(),
    })
}

/// A node `--apply` stopped at, as a needsAttention entry.
fn stopped(a: &Entry) -> Option<Attention> {
    Some(Attention {
        node: a.subject.node.clone(),
        pool: a.subject.pool.clone(),
        why: a.why.clone(),
        to_do: vec![a.to_do.clone()],
        problems: vec![a.problem?],
        registry: a.found.registry.clone(),
    })
}
