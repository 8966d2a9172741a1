//! Whether `prune --apply` still deletes a build once it has re-planned it from a fresh read
//! right before the delete, and on what the delete is conditional. Table-tested
//! (`tests/recheck.rs`).

use super::{Plan, Planned};

/// A build, re-planned right before its delete.
#[derive(Debug, PartialEq)]
pub enum Recheck<'a> {
    /// Still deletable: delete it only if it is still this uid at this resourceVersion.
    Deletable {
        build: &'a Planned,
        uid: &'a str,
        version: &'a str,
    },
    /// Gone when re-read: nothing to delete (why).
    Gone(String),
    /// Changed since the plan: not deleted (why).
    Changed(String),
}

/// Build `name` in `plan`, the fresh plan.
pub fn recheck<'a>(plan: &'a Plan, name: &str) -> Recheck<'a> {
    let Some(build) = plan.build(name) else {
        return Recheck::Gone("gone when re-read: nothing to delete".to_string());
    };
    if !build.deletable() {
        let why: Vec<&str> = build.why.iter().map(|w| w.text.as_str()).collect();
        return Recheck::Changed(format!(
            "changed since the plan, so not deleted: the fresh plan keeps it: {}",
            why.join("; ")
        ));
    }
    // A delete without both preconditions could remove a build other than the one planned:
    // the API server always sends both, so a read without them is stopped on, not guessed.
    match (build.uid.as_deref(), build.resource_version.as_deref()) {
        (Some(uid), Some(version)) => Recheck::Deletable {
            build,
            uid,
            version,
        },
        _ => Recheck::Changed(
            "the re-read build has no uid or resourceVersion to make its delete conditional on; \
             nothing was deleted"
                .to_string(),
        ),
    }
}
