//! What a command says about the source it decides from, also printed on stderr as warnings:
//! a dump's skipped files, what could not be read whole and disagreeing copies; the APIs a live
//! cluster does not serve.

use crate::access::dump::Loaded;

/// A dump's notes.
pub(super) fn of_dump(loaded: &Loaded) -> Vec<String> {
    let mut notes = loaded.warnings.clone();
    notes.extend(
        loaded
            .incomplete
            .iter()
            .map(|i| format!("not read whole: {i}")),
    );
    notes.extend(loaded.variant_note());
    notes
}

/// A live read's notes: each API the cluster does not serve.
pub(super) fn of_live(missing: &[&str]) -> Vec<String> {
    missing
        .iter()
        .map(|m| format!("the cluster does not serve {m}; treated as empty"))
        .collect()
}

/// Prints the notes on stderr, one `warning:` line each.
pub(super) fn warn(notes: &[String]) {
    for n in notes {
        eprintln!("warning: {n}");
    }
}
