//! Reading a dump for the commands' `--from-dir`: an incomplete one is an error unless
//! --allow-incomplete, and the error says what the command could not trust; and the snapshots
//! `check` and `prune` decide from, from a dump or the live cluster.

use std::path::Path;

use crate::access::dump::{self, Want};
use crate::access::live;
use crate::cli::args::{ClusterArgs, DumpArgs};
use crate::cli::error::CliError;
use crate::cli::notes;
use crate::core::snapshot::Snapshot;

/// Reads a dump for `want`; one that could not be read whole is an error unless
/// `allow_incomplete`, saying what of the command's answer it leaves untrusted (`trust`).
pub(super) fn read_dump(
    dir: &Path,
    allow_incomplete: bool,
    want: Want,
    trust: &'static str,
) -> Result<dump::Loaded, CliError> {
    let loaded = dump::load_dir_for(dir, want)?;
    if loaded.incomplete.is_empty() || allow_incomplete {
        return Ok(loaded);
    }
    Err(CliError::Incomplete {
        dir: dir.to_path_buf(),
        missing: loaded.incomplete,
        trust,
    })
}

/// A flag that works on the live cluster only: given with `--from-dir`, a usage error saying
/// `why`.
pub(super) fn live_only(dump: &DumpArgs, given: bool, why: &str) -> Result<(), CliError> {
    match given && dump.from_dir.is_some() {
        true => Err(CliError::Usage(why.to_string())),
        false => Ok(()),
    }
}

/// What an incomplete dump leaves untrusted in a verdict.
pub(super) const NO_VERDICT: &str = "no verdict can say a deletion is safe";

/// The dump `serve --from-dir` decides from: one snapshot, so disagreeing copies (like an
/// incomplete dump) need --allow-incomplete, and then the copy read last of each is served.
pub(super) fn load_static(dir: &Path, allow_incomplete: bool) -> Result<Snapshot, CliError> {
    let loaded = read_dump(dir, allow_incomplete, Want::Policy, NO_VERDICT)?;
    for w in loaded.warnings.iter().chain(&loaded.incomplete) {
        tracing::warn!("{w}");
    }
    if let Some(note) = loaded.variant_note() {
        if !allow_incomplete {
            return Err(CliError::Disagreeing {
                dir: dir.to_path_buf(),
                note,
            });
        }
        tracing::warn!("{note}; serving the copy read last of each");
    }
    Ok(loaded.snapshot)
}

/// What `check` and `prune` decide from.
pub(super) struct Source {
    /// One snapshot, or one per combination of a dump's disagreeing copies; each with
    /// `--openshift-version` applied.
    pub(super) snapshots: Vec<Snapshot>,
    /// Notes about the source (also printed on stderr).
    pub(super) notes: Vec<String>,
    /// The dump's directory, or "the cluster".
    pub(super) place: String,
    /// The live cluster's client (`None` for a dump).
    pub(super) client: Option<kube::Client>,
}

/// Reads the dump `dump` names, else the live cluster; `trust`: what an incomplete dump leaves
/// untrusted.
pub(super) async fn read_source(
    cluster: &ClusterArgs,
    dump: &DumpArgs,
    trust: &'static str,
    version: Option<&str>,
) -> Result<Source, CliError> {
    let (snapshots, notes, place, client) = match &dump.from_dir {
        Some(dir) => {
            let loaded = read_dump(dir, dump.allow_incomplete, Want::Policy, trust)?;
            let notes = notes::of_dump(&loaded);
            let snapshots: Vec<Snapshot> = loaded.snapshots().cloned().collect();
            (snapshots, notes, dir.display().to_string(), None)
        }
        None => {
            let client = cluster.client().await?;
            let (snapshot, missing) = live::snapshot(&client).await?;
            let notes = notes::of_live(&missing);
            (
                vec![snapshot],
                notes,
                "the cluster".to_string(),
                Some(client),
            )
        }
    };
    notes::warn(&notes);
    Ok(Source {
        snapshots: snapshots
            .into_iter()
            .map(|s| s.with_release_override(version))
            .collect(),
        notes,
        place,
        client,
    })
}
