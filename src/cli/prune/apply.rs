//! `prune --apply`: the plan's deletable builds deleted on the live cluster, one at a time, in
//! the plan's order (by MachineOSConfig, oldest first); with `--images`, then the deletable
//! images, one digest at a time ([`super::images_apply`]). For each build: re-read everything the
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

use super::images_apply::ImageTurn;
use super::outcome::{Applied, Clock, Outcome, Step, set_step};
use crate::access::registry::Registries;
use crate::core::prune::images::DeletableImage;

/// What the run did.
#[derive(Default)]
pub(super) struct Done {
    pub(super) builds: Vec<Applied>,
    /// With `--images`: each deletable image (digest).
    pub(super) images: Vec<Applied>,
    pub(super) interrupted: bool,
}

impl Done {
    /// 0 every build and image deleted (or nothing to do), 2 a re-read failed, 130
    /// interrupted, else 1.
    pub(super) fn exit_status(&self) -> std::process::ExitCode {
        use std::process::ExitCode;
        let all = || self.builds.iter().chain(&self.images);
        if self.interrupted {
            ExitCode::from(130)
        } else if all().any(|b| b.outcome == Outcome::ReadFailed) {
            ExitCode::from(2)
        } else if all().all(Applied::goes_on) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

/// One thing to delete, in the run's order: the builds, then the images.
#[derive(Clone, Copy)]
enum Todo<'a> {
    Build(&'a str),
    Image(&'a DeletableImage),
}

impl Todo<'_> {
    fn untouched(self) -> Applied {
        match self {
            Todo::Build(name) => Applied::new(name),
            Todo::Image(image) => Applied::image(image.image(), image.tags.clone()),
        }
    }

    /// What Ctrl-C at `step` of its turn left behind.
    fn interrupted(self, step: Step) -> &'static str {
        match (self, step) {
            (_, Step::Reading) => "interrupted (Ctrl-C) before its delete: nothing was deleted",
            (Todo::Build(_), Step::Deleting) => {
                "interrupted (Ctrl-C) while its delete request was in flight: the API server \
                 may or may not have applied it; run prune again, which re-reads every build"
            }
            (Todo::Build(_), Step::Waiting) => {
                "interrupted (Ctrl-C) after the API server accepted its delete, while waiting \
                 for it to go: it is being deleted (MCO then deletes its image)"
            }
            (Todo::Image(_), Step::Deleting) => {
                "interrupted (Ctrl-C) while its delete request was in flight: the registry may \
                 or may not have applied it; run prune again, which lists every tag again"
            }
            (Todo::Image(_), Step::Waiting) => {
                "interrupted (Ctrl-C) after the registry accepted its delete, while checking \
                 that it is gone"
            }
        }
    }
}

/// Deletes `plan`'s deletable builds, in the plan's order, then (with `images`) the deletable
/// images, one digest at a time.
pub(super) async fn run(
    client: &Client,
    plan: &Plan,
    images: Option<(&[DeletableImage], &Registries)>,
    args: &PruneArgs,
) -> Done {
    let clock = Clock::start();
    let mut todo: Vec<Todo> = plan.deletable().map(|b| Todo::Build(&b.name)).collect();
    let builds = todo.len();
    if let Some((deletable, _)) = images {
        todo.extend(deletable.iter().map(Todo::Image));
    }
    let mut done = Done::default();
    if todo.is_empty() {
        clock.line(match images {
            Some(_) => "nothing to apply: no build and no image is deletable",
            None => "nothing to apply: no build is deletable",
        });
        return done;
    }
    let options = Options {
        keep: args.keep,
        keep_younger_than: args.keep_younger_than,
    };
    let version = args.openshift_version.as_deref();
    let mut results: Vec<Applied> = Vec::new();
    let mut current: Option<(usize, Step)> = None;
    let interrupted = {
        let work = async {
            for (i, &item) in todo.iter().enumerate() {
                current = Some((i, Step::Reading));
                let applied = match item {
                    Todo::Build(name) => {
                        Turn {
                            client,
                            clock: &clock,
                            options: &options,
                            version,
                            timeout: args.timeout,
                            step: &mut current,
                        }
                        .one(name)
                        .await
                    }
                    Todo::Image(image) => {
                        let registries = images.map(|(_, r)| r);
                        ImageTurn {
                            client,
                            clock: &clock,
                            registries,
                            version,
                            step: &mut current,
                        }
                        .one(image)
                        .await
                    }
                };
                current = None;
                let goes_on = applied.goes_on();
                results.push(applied);
                if !goes_on {
                    results.extend(todo[i + 1..].iter().map(|t| t.untouched()));
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
        if let Some((i, step)) = current {
            let why = todo[i].interrupted(step).to_string();
            results.push(todo[i].untouched().end(&clock, Outcome::Interrupted, why));
        }
        let listed = results.len();
        results.extend(todo.iter().skip(listed).map(|t| t.untouched()));
    }
    done.images = results.split_off(builds.min(results.len()));
    done.builds = results;
    done
}

/// One build's turn: re-read, re-plan, delete, wait.
struct Turn<'a, 'b> {
    client: &'a Client,
    clock: &'a Clock,
    options: &'a Options,
    version: Option<&'a str>,
    timeout: Duration,
    step: &'b mut Option<(usize, Step)>,
}

impl<'a> Turn<'a, '_> {
    async fn one(&mut self, name: &'a str) -> Applied {
        let (clock, a) = (self.clock, Applied::new(name));
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
        // A delete without both preconditions could remove a build other than the one planned:
        // the API server always sends both, so a read without them is stopped on, not guessed.
        let (Some(uid), Some(version)) = (build.uid.as_deref(), build.resource_version.as_deref())
        else {
            let why = "the re-read build has no uid or resourceVersion to make its delete \
                       conditional on; nothing was deleted"
                .to_string();
            return a.end(clock, Outcome::Stopped("changedSincePlan"), why);
        };
        clock.line(format!(
            "build {name}: still deletable; deleting it (uid {uid}, resourceVersion {version}): {}",
            words::deletes(build)
        ));
        set_step(self.step, Step::Deleting);
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
        set_step(self.step, Step::Waiting);
        clock.line(format!(
            "build {name}: delete accepted; waiting up to {} for it to go",
            words::duration(self.timeout)
        ));
        self.wait_gone(name, uid, a).await
    }

    /// Until the build (this uid) is gone, or `timeout`.
    async fn wait_gone(&self, name: &str, uid: &str, a: Applied) -> Applied {
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
    for a in done.builds.iter().chain(&done.images) {
        let why = if a.why.is_empty() {
            "the run stopped before this one"
        } else {
            a.why.as_str()
        };
        out.push_str(&format!(
            "  {} {} ({:.1}s): {why}\n",
            a.outcome.shout(),
            a.subject,
            a.elapsed_seconds
        ));
    }
    out
}
