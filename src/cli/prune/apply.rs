//! `prune --apply`: the plan's deletable builds deleted on the live cluster, one at a time, in
//! the plan's order (by MachineOSConfig, oldest first). For each build: re-read everything the
//! plan reads and re-plan from that read; delete it as the admin, conditional on the uid and
//! resourceVersion of that read; wait until it is gone. The guard's webhook reviews each delete
//! and MCO's MOSB-delete handler then deletes its image, as for any hand deletion.
//!
//! Anything unexpected stops the run with a report, and nothing is retried or worked around: a
//! build the fresh plan keeps (`changedSincePlan`, with the reasons), a delete whose
//! preconditions fail (`changedSincePlan`: nothing deleted), a delete the API server refuses
//! (`refused`: the guard's refusal, or RBAC, word for word), a build still there past
//! `--timeout` (`timedOut`). The builds after it are listed as not attempted.
//!
//! Ctrl-C leaves no half-done delete unreported: the build being worked on is listed with the
//! step it was at (nothing written yet; a delete request in flight, which may or may not have
//! been applied; a delete accepted, waited for), and the next run re-reads every build.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;

use crate::access::live;
use crate::access::prune::{DeleteError, build_exists, delete_build};
use crate::cli::args::PruneArgs;
use crate::core::prune::{self, Options, Plan, words};

use super::outcome::{Applied, Clock, Outcome};

/// What the run did.
#[derive(Default)]
pub(super) struct Done {
    pub(super) builds: Vec<Applied>,
    pub(super) interrupted: bool,
}

impl Done {
    /// 0 every build deleted (or nothing to do), 2 a re-read failed, 130 interrupted, else 1.
    pub(super) fn exit_status(&self) -> std::process::ExitCode {
        use std::process::ExitCode;
        if self.interrupted {
            ExitCode::from(130)
        } else if self.builds.iter().any(|b| b.outcome == Outcome::ReadFailed) {
            ExitCode::from(2)
        } else if self.builds.iter().all(Applied::goes_on) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

/// Where a build's turn was when Ctrl-C came.
#[derive(Clone, Copy)]
enum Step {
    Reading,
    Deleting,
    Waiting,
}

/// Deletes `plan`'s deletable builds, in the plan's order.
pub(super) async fn run(client: &Client, plan: &Plan, args: &PruneArgs) -> Done {
    let clock = Clock::start();
    let todo: Vec<&str> = plan.deletable().map(|b| b.name.as_str()).collect();
    let mut done = Done::default();
    if todo.is_empty() {
        clock.line("nothing to apply: no build is deletable");
        return done;
    }
    let options = Options {
        keep: args.keep,
        keep_younger_than: args.keep_younger_than,
    };
    let version = args.openshift_version.as_deref();
    let mut current: Option<(&str, Step)> = None;
    let interrupted = {
        let work = async {
            for (i, &name) in todo.iter().enumerate() {
                let applied = Turn {
                    client,
                    clock: &clock,
                    options: &options,
                    version,
                    timeout: args.timeout,
                    step: &mut current,
                }
                .one(name)
                .await;
                current = None;
                let goes_on = applied.goes_on();
                done.builds.push(applied);
                if !goes_on {
                    done.builds
                        .extend(todo[i + 1..].iter().map(|n| Applied::new(n)));
                    return;
                }
            }
        };
        tokio::select! {
            () = work => false,
            _ = tokio::signal::ctrl_c() => true,
        }
    };
    if interrupted {
        done.interrupted = true;
        if let Some((name, step)) = current {
            let why = match step {
                Step::Reading => "interrupted (Ctrl-C) before its delete: nothing was deleted",
                Step::Deleting => {
                    "interrupted (Ctrl-C) while its delete request was in flight: the API server \
                     may or may not have applied it; run prune again, which re-reads every build"
                }
                Step::Waiting => {
                    "interrupted (Ctrl-C) after the API server accepted its delete, while waiting \
                     for it to go: it is being deleted (MCO then deletes its image)"
                }
            };
            done.builds
                .push(Applied::new(name).end(&clock, Outcome::Interrupted, why.to_string()));
        }
        let listed = done.builds.len();
        done.builds
            .extend(todo.iter().skip(listed).map(|n| Applied::new(n)));
    }
    done
}

/// One build's turn: re-read, re-plan, delete, wait.
struct Turn<'a, 'b> {
    client: &'a Client,
    clock: &'a Clock,
    options: &'a Options,
    version: Option<&'a str>,
    timeout: Duration,
    step: &'b mut Option<(&'a str, Step)>,
}

impl<'a> Turn<'a, '_> {
    async fn one(&mut self, name: &'a str) -> Applied {
        let (clock, a) = (self.clock, Applied::new(name));
        *self.step = Some((name, Step::Reading));
        clock.line(format!(
            "build {name}: re-reading what its plan rests on (MachineOSBuilds, MachineOSConfigs, \
             pools, nodes, Machines, the release) and re-planning it"
        ));
        let fresh = match live::snapshot(self.client).await {
            Ok((snapshot, _)) => snapshot.with_release_override(self.version),
            Err(e) => {
                let why = format!("could not re-read the cluster: {e}; nothing was deleted");
                return a.end(clock, Outcome::ReadFailed, why);
            }
        };
        let plan = prune::plan(&fresh, self.options, Timestamp::now());
        let Some(build) = plan.build(name) else {
            let why = "gone when re-read: nothing to delete".to_string();
            return a.end(clock, Outcome::NothingToDo, why);
        };
        if !build.deletable() {
            let why = format!(
                "changed since the plan, so not deleted: the fresh plan keeps it: {}",
                build
                    .why
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            return a.end(clock, Outcome::Stopped("changedSincePlan"), why);
        }
        let (uid, version) = (build.uid.as_deref(), build.resource_version.as_deref());
        clock.line(format!(
            "build {name}: still deletable; deleting it (uid {}, resourceVersion {}): {}",
            uid.unwrap_or("?"),
            version.unwrap_or("?"),
            words::deletes(build)
        ));
        *self.step = Some((name, Step::Deleting));
        match delete_build(self.client, name, uid, version).await {
            Ok(()) => {}
            Err(DeleteError::Gone) => {
                let why = "gone before its delete: nothing to delete".to_string();
                return a.end(clock, Outcome::NothingToDo, why);
            }
            Err(DeleteError::Changed(message)) => {
                let why = format!(
                    "the API server refused the delete's preconditions: the build changed between \
                     the read and the delete ({message}); nothing was deleted"
                );
                return a.end(clock, Outcome::Stopped("changedSincePlan"), why);
            }
            Err(DeleteError::Refused(message)) => {
                let why = format!(
                    "the API server refused the delete; nothing was deleted, and prune does not \
                     try another way: {message}"
                );
                return a.end(clock, Outcome::Stopped("refused"), why);
            }
            Err(e @ DeleteError::Failed(_)) => {
                let why = format!(
                    "{e}; the API server may or may not have applied it: run prune again, which \
                     re-reads every build"
                );
                return a.end(clock, Outcome::Failed, why);
            }
        }
        *self.step = Some((name, Step::Waiting));
        clock.line(format!(
            "build {name}: delete accepted; waiting up to {} for it to go",
            words::duration(self.timeout)
        ));
        self.wait_gone(name, uid, a).await
    }

    /// Until the build (this uid) is gone, or `timeout`.
    async fn wait_gone(&self, name: &str, uid: Option<&str>, a: Applied) -> Applied {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match build_exists(self.client, name, uid).await {
                Ok(false) => {
                    let why = "deleted: MCO deletes its image from the registry (its \
                               MachineOSBuild-delete handler)"
                        .to_string();
                    return a.end(self.clock, Outcome::Deleted, why);
                }
                Ok(true) => {}
                Err(e) => self.clock.line(format!(
                    "build {name}: could not read it ({e}); trying again"
                )),
            }
            if tokio::time::Instant::now() >= deadline {
                let why = format!(
                    "its delete was accepted but it is still there after {} (its \
                     foregroundDeletion finalizer waits for the garbage collector to remove its \
                     Job and ConfigMaps): not waiting longer",
                    words::duration(self.timeout)
                );
                return a.end(self.clock, Outcome::Stopped("timedOut"), why);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The text summary of a run.
pub(super) fn summary(done: &Done) -> String {
    let mut out = String::from("\nApplied:\n");
    for a in &done.builds {
        let why = if a.why.is_empty() {
            "the run stopped before this build"
        } else {
            a.why.as_str()
        };
        out.push_str(&format!(
            "  {} build {} ({:.1}s): {why}\n",
            a.outcome.shout(),
            a.build,
            a.elapsed_seconds
        ));
    }
    out
}
