//! `check`: the verdict for one MachineOSConfig or MachineOSBuild, from the live cluster or a
//! dump, as text or JSON. Exit status 0 safe, 1 blocked, 2 error.

use std::process::ExitCode;

use crate::access::registry::{self, Checker, Limits, PullConfigError};
use crate::cli::args::{CheckArgs, Output};
use crate::cli::dump::{NO_VERDICT, Source, read_source};
use crate::cli::error::CliError;
use crate::cli::output;
use crate::core::policy::{self, Deletion, PolicyMode, TargetKind};
use crate::core::recovery::{self, stuck::stuck_nodes};
use crate::core::registry::Status;
use crate::core::registry::report::{ProtectedImage, already_missing};
use crate::core::report::{self, Report};
use crate::core::snapshot::Snapshot;

/// Parses a `check` target.
pub fn parse_target(target: &str) -> Result<(TargetKind, &str), CliError> {
    let (kind, name) = match target.split_once('/') {
        None => (TargetKind::MachineOSConfig, target),
        Some((kind, name)) => {
            let kind = match kind.to_ascii_lowercase().as_str() {
                "machineosconfig" | "machineosconfigs" | "mosc" => TargetKind::MachineOSConfig,
                "machineosbuild" | "machineosbuilds" | "mosb" => TargetKind::MachineOSBuild,
                other => {
                    return Err(CliError::Usage(format!(
                        "unknown kind {other:?}: expected machineosconfig/NAME, mosc/NAME, machineosbuild/NAME or mosb/NAME"
                    )));
                }
            };
            (kind, name)
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(CliError::Usage(format!(
            "invalid target {target:?}: expected KIND/NAME or NAME"
        )));
    }
    Ok((kind, name))
}

/// Runs `check`; returns the exit status (0 safe, 1 blocked, 2 error).
pub async fn check(args: CheckArgs) -> ExitCode {
    output::passed(run_check(&args).await)
}

async fn run_check(args: &CheckArgs) -> Result<bool, CliError> {
    let target = args.target.as_deref().map(parse_target).transpose()?;
    let source = &args.source;
    let version = source.openshift_version.as_deref();
    let Source {
        snapshots,
        notes,
        place,
        ..
    } = read_source(&source.cluster, &source.dump, NO_VERDICT, version).await?;
    let mode = args.source.policy.into();
    let Some((kind, name)) = target else {
        return all(args, &snapshots, notes, mode);
    };
    let verdict = most_cautious(&snapshots, kind, name, mode).ok_or_else(|| {
        let api = format!("{}s.", kind.cli_name());
        let hint = notes
            .iter()
            .find(|n| n.contains(&api))
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        CliError::NotFound {
            kind,
            name: name.to_string(),
            place: place.clone(),
            hint,
        }
    })?;
    let served = registry_answers(args, &verdict).await;
    match args.output {
        Output::Text => {
            println!("{}", report::text(&verdict));
            for s in served
                .iter()
                .flatten()
                .filter(|s| s.status == Status::Missing)
            {
                println!("Note: {}", already_missing(s));
            }
        }
        Output::Json => {
            let report = Report::new(&verdict, notes);
            let report = match served {
                Some(served) => report.with_registry(served),
                None => report,
            };
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(verdict.allowed)
}

/// Live, unless `--no-registry`: what the registry answers for each image the deletion guards,
/// asked as a node pulls. `None` when not asked: a dump (no credentials), no guarded image, or
/// a cluster that does not serve the ControllerConfig (not OpenShift); a ControllerConfig that
/// cannot be read is a warning. The exit status never depends on it: deleting is the question.
async fn registry_answers(
    args: &CheckArgs,
    verdict: &policy::Verdict,
) -> Option<Vec<ProtectedImage>> {
    if args.no_registry || args.source.dump.from_dir.is_some() || verdict.images.is_empty() {
        return None;
    }
    let client = args.source.cluster.client().await.ok()?;
    let pull = match registry::pull_config(&client).await {
        Ok(pull) => pull,
        Err(PullConfigError::NoControllerConfig) => {
            tracing::debug!("the registry is not asked: the cluster has no ControllerConfig");
            return None;
        }
        Err(e) => {
            eprintln!(
                "warning: the registry was not asked whether the images are still served: {e}"
            );
            return None;
        }
    };
    let checker = Checker::new(pull, Limits::default());
    let images: Vec<String> = verdict.images.iter().map(|g| g.image.clone()).collect();
    let answers = checker.check_all(&images).await;
    Some(
        answers
            .into_iter()
            .map(|a| ProtectedImage {
                image: a.image,
                status: a.verdict.status,
                why: a.verdict.why,
            })
            .collect(),
    )
}

/// The verdict for one target: where copies of an object disagree, the most cautious verdict
/// over the combinations (the first refusal, else the first verdict).
fn most_cautious(
    snapshots: &[Snapshot],
    kind: TargetKind,
    name: &str,
    mode: PolicyMode,
) -> Option<policy::Verdict> {
    let mut verdicts = snapshots
        .iter()
        .filter_map(|s| Some(policy::evaluate(s, find(s, kind, name)?, mode)));
    let first = verdicts.next()?;
    Some(match first.allowed {
        true => verdicts.find(|v| !v.allowed).unwrap_or(first),
        false => first,
    })
}

/// `check --all`: every MachineOSConfig (and with --builds every MachineOSBuild), as a table or
/// a JSON array of reports. True when every deletion would be allowed.
fn all(
    args: &CheckArgs,
    snapshots: &[Snapshot],
    notes: Vec<String>,
    mode: PolicyMode,
) -> Result<bool, CliError> {
    let Some(first) = snapshots.first() else {
        return Ok(true);
    };
    let configs = first
        .machine_os_configs
        .iter()
        .map(|m| (TargetKind::MachineOSConfig, m.name()));
    let builds = first
        .machine_os_builds
        .iter()
        .filter(|_| args.builds)
        .map(|b| (TargetKind::MachineOSBuild, b.name()));
    let verdicts: Vec<policy::Verdict> = configs
        .chain(builds)
        .filter_map(|(kind, name)| most_cautious(snapshots, kind, name, mode))
        .collect();
    // Nodes the bug already hurt: listed, not counted in the exit status (deleting is a
    // separate question); the JSON array of reports keeps its schema, so they go to stderr there.
    let stuck = stuck_nodes(first);
    match args.output {
        Output::Text => print!(
            "{}{}",
            report::table(&verdicts),
            recovery::words::stuck_table(&stuck)
        ),
        Output::Json => {
            let reports: Vec<Report> = verdicts
                .iter()
                .map(|v| Report::new(v, notes.clone()))
                .collect();
            println!("{}", serde_json::to_string_pretty(&reports)?);
            for s in &stuck {
                eprintln!("warning: {}", recovery::words::stuck_warning(s));
            }
        }
    }
    Ok(verdicts.iter().all(|v| v.allowed))
}

fn find<'a>(snapshot: &'a Snapshot, kind: TargetKind, name: &str) -> Option<Deletion<'a>> {
    match kind {
        TargetKind::MachineOSConfig => snapshot
            .machine_os_config(name)
            .map(Deletion::MachineOSConfig),
        TargetKind::MachineOSBuild => snapshot
            .machine_os_build(name)
            .map(Deletion::MachineOSBuild),
    }
}

#[cfg(test)]
mod tests;
