//! Reads a [`Snapshot`] from a directory (a must-gather, or `oc get -o yaml|json` files): every
//! `*.yaml`, `*.yml` and `*.json` file below it, in path order; each document a single object or a
//! list; Nodes and the v1 MCO kinds kept. It fails closed: a file that holds or claims to hold
//! ([`read::claim`]) a kind the policy reads and cannot be read whole, or nodes without pools, make
//! it [`Loaded::incomplete`]; other unreadable files are warnings. A recovery plan
//! ([`Want::Recovery`]) also reads each Node as [`RecoveryNode`] and the MachineConfigs' names.

mod copies;
mod objects;
mod read;
mod skipped;
#[cfg(test)]
mod tests;
mod typed;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::core::recovery::RecoveryNode;
use crate::core::snapshot::Snapshot;
use objects::Objects;
use skipped::Skipped;

/// What the dump is read for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Want {
    /// The deletion policy: the lean nodes and the kinds around them.
    #[default]
    Policy,
    /// A recovery plan: also each Node as recovery reads it and the MachineConfigs' names.
    Recovery,
}

/// What a recovery plan reads from a dump besides the policy's snapshot.
#[derive(Debug, Default)]
pub struct RecoveryObjects {
    /// Every Node (of copies, the one the policy's snapshot also took).
    pub nodes: Vec<RecoveryNode>,
    /// The MachineConfigs' names; `None` when the dump holds none.
    pub machine_configs: Option<std::collections::BTreeSet<String>>,
    /// Nodes whose copies disagree with no resourceVersion to choose between them.
    pub disagreeing: std::collections::BTreeSet<String>,
}

/// The extensions of the files read.
const READ: [&str; 3] = ["yaml", "yml", "json"];

/// Combinations of disagreeing copies decided before the dump counts as incomplete.
const MAX_VARIANTS: usize = 64;

/// A snapshot read from a directory.
#[derive(Debug)]
pub struct Loaded {
    /// The objects, taking the copy read last of each object whose copies disagree.
    pub snapshot: Snapshot,
    /// The other snapshots the dump allows where copies of an object disagree with no
    /// resourceVersion to choose between them: a verdict over the dump is the most cautious
    /// one over `snapshot` and these.
    pub variants: Vec<Snapshot>,
    /// `skipping <path relative to dir>: <reason>`, in path order: files that hold nothing
    /// the policy reads and could not be read.
    pub warnings: Vec<String>,
    /// What the policy reads and could not be read whole, one line each, in path order; a
    /// verdict over an incomplete dump cannot say a deletion is safe.
    pub incomplete: Vec<String>,
    /// With [`Want::Recovery`]: what a recovery plan reads besides.
    pub recovery: Option<RecoveryObjects>,
    /// The ControllerConfig and the ImageDigestMirrorSets and ImageContentSourcePolicies, as
    /// `(kind, object)`: what a pull as the node makes it reads (`mosc-guard images`).
    pub pull: Vec<(String, serde_json::Value)>,
}

impl Loaded {
    /// `snapshot`, then every variant.
    pub fn snapshots(&self) -> impl Iterator<Item = &Snapshot> {
        std::iter::once(&self.snapshot).chain(&self.variants)
    }

    /// Notes about disagreeing copies, for warnings.
    pub fn variant_note(&self) -> Option<String> {
        (!self.variants.is_empty()).then(|| {
            format!(
                "copies of some objects disagree and carry no resourceVersion to choose between them; \
                 the verdict is the most cautious of {} combinations",
                self.variants.len() + 1
            )
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The directory itself is missing, not a directory, or unreadable.
    #[error("cannot read directory {}: {reason}", path.display())]
    ReadDir { path: PathBuf, reason: io::Error },
}

/// Reads every Kubernetes object the policy reads below `dir`.
pub fn load_dir(dir: &Path) -> Result<Loaded, DumpError> {
    load_dir_for(dir, Want::Policy)
}

/// Reads every Kubernetes object `want` needs below `dir`.
pub fn load_dir_for(dir: &Path, want: Want) -> Result<Loaded, DumpError> {
    // Reading the root up front gives the plain OS reason (missing, not a directory,
    // permission denied) instead of a walker error.
    std::fs::read_dir(dir).map_err(|reason| DumpError::ReadDir {
        path: dir.to_path_buf(),
        reason,
    })?;

    let mut notes = Notes::default();
    let mut files = Vec::new();
    for entry in WalkDir::new(dir).follow_links(true) {
        match entry {
            Ok(entry) if entry.file_type().is_file() && has_extension(entry.path(), &READ) => {
                files.push(entry.into_path());
            }
            Ok(_) => {}
            Err(err) => {
                let path = err.path().unwrap_or(dir).to_path_buf();
                if path == dir {
                    let reason = err.to_string();
                    return Err(DumpError::ReadDir {
                        path,
                        reason: err
                            .into_io_error()
                            .unwrap_or_else(|| io::Error::other(reason)),
                    });
                }
                let rel = rel(dir, &path);
                if err.loop_ancestor().is_some() {
                    notes.warn(&path, &rel, "symlink loop, not followed again");
                    continue;
                }
                let reason = err
                    .io_error()
                    .map_or_else(|| err.to_string(), ToString::to_string);
                // A directory or file that cannot be listed may hold anything.
                notes.incomplete(&path, &rel, format!("cannot read: {reason}"));
            }
        }
    }
    files.sort();
    files.dedup();

    let mut objects = Objects::new(want);
    for path in &files {
        load_file(dir, path, &mut objects, &mut notes);
    }
    if let Some(nodes) = objects.nodes_without_pools() {
        notes.incomplete_dump(format!(
            "{nodes} Nodes but no MachineConfigPools: which pool each node is in, and so whether a \
             pool is still rolling out, cannot be told"
        ));
    }
    let disagreeing = objects.disagreeing();
    let recovery = objects.take_recovery();
    let pull = std::mem::take(&mut objects.pull);
    let snapshots = objects.into_snapshots(MAX_VARIANTS).unwrap_or_else(|| {
        notes.incomplete_dump(format!(
            "copies of {} objects disagree with no resourceVersion to choose between them, \
                 too many combinations to decide on each ({})",
            disagreeing.len(),
            disagreeing.join(", ")
        ));
        Vec::new()
    });
    let mut snapshots = snapshots.into_iter();
    let snapshot = snapshots.next().unwrap_or_default();
    tracing::debug!(
        dir = %dir.display(),
        files = files.len(),
        "read snapshot from directory"
    );
    let (warnings, incomplete) = notes.into_sorted();
    Ok(Loaded {
        snapshot,
        variants: snapshots.collect(),
        warnings,
        incomplete,
        recovery,
        pull,
    })
}

/// Warnings and gaps, each tagged with the path it is about, so they come out in path order.
#[derive(Default)]
struct Notes {
    warnings: Vec<(PathBuf, String)>,
    incomplete: Vec<(PathBuf, String)>,
    dump: Vec<String>,
}

impl Notes {
    fn warn(&mut self, path: &Path, rel: &str, reason: impl fmt::Display) {
        self.warnings
            .push((path.to_path_buf(), format!("skipping {rel}: {reason}")));
    }

    fn incomplete(&mut self, path: &Path, rel: &str, reason: impl fmt::Display) {
        self.incomplete
            .push((path.to_path_buf(), format!("{rel}: {reason}")));
    }

    /// A gap in the dump as a whole, listed after the files'.
    fn incomplete_dump(&mut self, reason: impl fmt::Display) {
        self.dump.push(reason.to_string());
    }

    fn into_sorted(self) -> (Vec<String>, Vec<String>) {
        // Stable: notes about one file keep the order they were found in.
        let sorted = |mut v: Vec<(PathBuf, String)>| {
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v.into_iter().map(|(_, w)| w).collect()
        };
        let mut incomplete: Vec<String> = sorted(self.incomplete);
        incomplete.extend(self.dump);
        (sorted(self.warnings), incomplete)
    }
}

/// Whether `path`'s extension is one of `extensions`, in any case.
fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    let extension = path.extension().and_then(|e| e.to_str());
    extension.is_some_and(|e| extensions.iter().any(|w| e.eq_ignore_ascii_case(w)))
}

/// `path` relative to `dir`, for messages.
fn rel(dir: &Path, path: &Path) -> String {
    let shown = path.strip_prefix(dir).unwrap_or(path);
    if shown.as_os_str().is_empty() {
        path.display().to_string()
    } else {
        shown.display().to_string()
    }
}

/// Reads one file into `objects`. A problem is a gap in the dump when the file claims to hold
/// the kinds the policy reads, or turned out to hold one; otherwise a warning.
fn load_file(dir: &Path, path: &Path, objects: &mut Objects, notes: &mut Notes) {
    let rel_path = path.strip_prefix(dir).unwrap_or(path);
    let rel = rel(dir, path);
    let raw = std::fs::read(path).map_err(|e| format!("cannot read: {e}"));
    // Of unreadable bytes, only the path can tell what they hold.
    let claim = read::claim(rel_path, raw.as_deref().unwrap_or_default(), objects.want());
    let documents = raw.and_then(|raw| {
        let text = read::text(&raw).map_err(|e| e.to_string())?;
        read::documents(text, has_extension(path, &["json"])).map_err(|e| e.to_string())
    });
    let documents = match documents {
        Ok(documents) => documents,
        Err(reason) => {
            match claim {
                Some(kind) => notes.incomplete(path, &rel, format!("{reason} (it holds {kind})")),
                None => notes.warn(path, &rel, reason),
            }
            return;
        }
    };
    let several = documents.len() > 1;
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        // An empty document (`---` at the end of a file, an empty file) holds nothing.
        if document.is_null() {
            continue;
        }
        if let Err(reason) = typed::flatten(document, None, &mut found) {
            problems.push(if several {
                Skipped::Document {
                    index: i + 1,
                    reason: Box::new(reason),
                }
            } else {
                reason
            });
        }
    }
    let mut holds_ours = false;
    for object in found {
        match objects.add(object) {
            Ok(ours) => holds_ours |= ours,
            Err(reason) => {
                holds_ours = true;
                notes.incomplete(path, &rel, reason);
            }
        }
    }
    // One note per file for its shape, however many documents or items are off.
    if let Some(reason) = Skipped::first_of(problems, false) {
        match (claim, holds_ours) {
            (Some(kind), _) => notes.incomplete(path, &rel, format!("{reason} (it holds {kind})")),
            (None, true) => notes.incomplete(path, &rel, reason),
            (None, false) => notes.warn(path, &rel, reason),
        }
    }
}
