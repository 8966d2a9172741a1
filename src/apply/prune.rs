//! `prune --apply`'s step: the plan's deletable builds, one at a time, in the plan's order (by
//! MachineOSConfig, oldest first), then with `--images` the deletable images ([`super::images`]).
//! For each build: re-read everything the plan reads and re-plan from that read; delete it as
//! the admin, conditional on the uid and resourceVersion of that read; wait until it is gone.
//! The guard's webhook reviews each delete, and MCO's MOSB-delete handler then deletes its
//! image, as for any hand deletion. Anything unexpected stops the run; nothing is retried.

use std::cell::Cell;
use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Serialize;

use crate::access::live;
use crate::access::prune::{DeleteError, build_exists, delete_build};
use crate::core::prune::images::DeletableImage;
use crate::core::prune::{self, Options, Plan, Recheck, words};
use crate::core::snapshot::Snapshot;

use super::outcome::{self, Applied, Outcome};
use super::{Clock, Stage, Step};
use crate::access::registry::Registries;

/// What a result is about: a build, or an image (a digest and the tags on it).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Subject {
    Build {
        build: String,
    },
    Image {
        /// `host/path@digest`.
        image: String,
        /// The tags on it, as planned.
        tags: Vec<String>,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Build { build } => write!(f, "build {build}"),
            Subject::Image { image, .. } => write!(f, "image {image}"),
        }
    }
}

impl outcome::Subject for Subject {
    const THIS: &'static str = "this one";
}

/// One build's (`applied[]`) or image's (`appliedImages[]`) result.
pub(crate) type Entry = Applied<Subject>;

/// What the run did, as `--output json` prints it beside the plan.
#[derive(Serialize)]
pub(crate) struct Done {
    #[serde(rename = "applied")]
    pub(crate) builds: Vec<Entry>,
    /// With `--images`: each deletable image (digest).
    #[serde(rename = "appliedImages", skip_serializing_if = "Vec::is_empty")]
    pub(crate) images: Vec<Entry>,
    #[serde(skip)]
    pub(crate) interrupted: bool,
}

impl Done {
    /// 0 every build and image deleted (or nothing to do), 2 a re-read failed, 130
    /// interrupted, else 1.
    pub(crate) fn exit_status(&self) -> ExitCode {
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

    pub(crate) fn summary(&self) -> String {
        outcome::summary(self.builds.iter().chain(&self.images))
    }
}

/// What the run works with besides the plan.
pub(crate) struct Settings<'a> {
    pub(crate) options: Options,
    /// `--openshift-version`.
    pub(crate) version: Option<&'a str>,
    pub(crate) timeout: Duration,
}

/// Deletes `plan`'s deletable builds, in the plan's order, then (with `images`) the deletable
/// images, one digest at a time.
pub(crate) async fn run(
    client: &Client,
    plan: &Plan,
    images: Option<(&[DeletableImage], &Registries)>,
    settings: Settings<'_>,
) -> Done {
    let clock = Clock::start();
    let mut todo: Vec<Todo> = plan.deletable().map(|b| Todo::Build(&b.name)).collect();
    let builds = todo.len();
    if let Some((deletable, _)) = images {
        todo.extend(deletable.iter().map(Todo::Image));
    }
    let nothing = match images {
        Some(_) => "nothing to apply: no build and no image is deletable",
        None => "nothing to apply: no build is deletable",
    };
    let mut step = PruneStep {
        client,
        clock: &clock,
        settings,
        registries: images.map(|(_, r)| r),
    };
    let mut ran = super::run(&mut step, &todo, &clock, nothing).await;
    let images = ran.applied.split_off(builds.min(ran.applied.len()));
    Done {
        builds: ran.applied,
        images,
        interrupted: ran.interrupted,
    }
}

/// One thing to delete, in the run's order: the builds, then the images.
pub(super) enum Todo<'a> {
    Build(&'a str),
    Image(&'a DeletableImage),
}

pub(super) struct PruneStep<'a> {
    pub(super) client: &'a Client,
    pub(super) clock: &'a Clock,
    pub(super) settings: Settings<'a>,
    pub(super) registries: Option<&'a Registries>,
}

impl<'a> Step for PruneStep<'a> {
    type Item = Todo<'a>;
    type Subject = Subject;
    type Found = ();

    fn entry(&self, item: &Todo) -> Entry {
        Applied::new(match item {
            Todo::Build(name) => Subject::Build {
                build: name.to_string(),
            },
            Todo::Image(image) => Subject::Image {
                image: image.image(),
                tags: image.tags.clone(),
            },
        })
    }

    async fn turn(&mut self, item: &Todo<'_>, stage: &Cell<Stage>) -> Entry {
        let (outcome, why) = match *item {
            Todo::Build(name) => self.build(name, stage).await,
            Todo::Image(image) => self.image(image, stage).await,
        };
        self.entry(item).end(self.clock, outcome, why)
    }

    fn interrupted(&self, item: &Todo, stage: Stage) -> String {
        match (item, stage) {
            (_, Stage::Reading) => "interrupted (Ctrl-C) before its delete: nothing was deleted",
            (Todo::Build(_), Stage::Writing) => {
                "interrupted (Ctrl-C) while its delete request was in flight: the API server \
                 may or may not have applied it; run prune again, which re-reads every build"
            }
            (Todo::Build(_), Stage::Waiting) => {
                "interrupted (Ctrl-C) after the API server accepted its delete, while waiting \
                 for it to go: it is being deleted (MCO then deletes its image)"
            }
            (Todo::Image(_), Stage::Writing) => {
                "interrupted (Ctrl-C) while its delete request was in flight: the registry may \
                 or may not have applied it; run prune again, which lists every tag again"
            }
            (Todo::Image(_), Stage::Waiting) => {
                "interrupted (Ctrl-C) after the registry accepted its delete, while checking \
                 that it is gone"
            }
        }
        .to_string()
    }
}

impl PruneStep<'_> {
    /// One build's turn: re-read, re-plan, delete, wait; what it came to, and why (said on the
    /// clock by the caller).
    async fn build(&self, name: &str, stage: &Cell<Stage>) -> (Outcome, String) {
        let clock = self.clock;
        clock.line(format!(
            "build {name}: re-reading what its plan rests on (MachineOSBuilds, MachineOSConfigs, \
             pools, nodes, Machines, the release) and re-planning it"
        ));
        let fresh = match self.reread().await {
            Ok(fresh) => fresh,
            Err(why) => return (Outcome::ReadFailed, why),
        };
        let plan = prune::plan(&fresh, &self.settings.options, Timestamp::now());
        let (build, uid, version) = match prune::recheck(&plan, name) {
            Recheck::Deletable {
                build,
                uid,
                version,
            } => (build, uid, version),
            Recheck::Gone(why) => return (Outcome::NothingToDo, why),
            Recheck::Changed(why) => return (Outcome::Stopped("changedSincePlan"), why),
        };
        clock.line(format!(
            "build {name}: still deletable; deleting it (uid {uid}, resourceVersion {version}): {}",
            words::deletes(build)
        ));
        stage.set(Stage::Writing);
        match delete_build(self.client, name, uid, version).await {
            Ok(()) => {
                stage.set(Stage::Waiting);
                clock.line(format!(
                    "build {name}: delete accepted; waiting up to {} for it to go",
                    words::duration(self.settings.timeout)
                ));
                self.wait_gone(name, uid).await
            }
            Err(DeleteError::Gone) => (
                Outcome::NothingToDo,
                "gone before its delete: nothing to delete".to_string(),
            ),
            Err(DeleteError::Changed(message)) => (
                Outcome::Stopped("changedSincePlan"),
                format!(
                    "the API server refused the delete's preconditions: the build changed \
                     between the read and the delete ({message}); nothing was deleted"
                ),
            ),
            Err(DeleteError::Refused(message)) => (
                Outcome::Stopped("refused"),
                format!(
                    "the API server refused the delete; nothing was deleted, and prune does not \
                     try another way: {message}"
                ),
            ),
            Err(e @ DeleteError::Failed(_)) => (
                Outcome::Failed,
                format!(
                    "{e}; the API server may or may not have applied it: run prune again, which \
                     re-reads every build"
                ),
            ),
        }
    }

    /// The cluster read again, with `--openshift-version` applied; `Err`: why not.
    pub(super) async fn reread(&self) -> Result<Snapshot, String> {
        live::snapshot(self.client)
            .await
            .map(|(snapshot, _)| snapshot.with_release_override(self.settings.version))
            .map_err(|e| format!("could not re-read the cluster: {e}; nothing was deleted"))
    }

    /// Until the build (this uid) is gone, or the timeout.
    async fn wait_gone(&self, name: &str, uid: &str) -> (Outcome, String) {
        let timeout = self.settings.timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match build_exists(self.client, name, uid).await {
                Ok(false) => {
                    let why = "deleted: MCO deletes its image from the registry (its \
                               MachineOSBuild-delete handler)";
                    return (Outcome::Deleted, why.to_string());
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
                    words::duration(timeout)
                );
                return (Outcome::Stopped("timedOut"), why);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
