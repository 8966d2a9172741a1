//! What `recover` asks the registry: is each image a stuck node waits for still served, asked
//! as the node pulls it; the answers are an input of the plan ([`crate::core::recovery::loss`]).
//! Live, the pull configuration is read once, when an image is first asked; one that cannot be
//! read makes every answer unknown, never missing. From a dump, the registry is asked only with
//! `--authfile` and the dump's ControllerConfig; otherwise the plan says the loss was not verified.

use std::collections::BTreeSet;
use std::path::Path;

use kube::Client;

use super::{Checker, Limits, PullConfigError, dump_pull_config, pull_config};
use crate::access::dump::Loaded;
use crate::core::recovery::{RegistryAnswers, WhenUnverified};
use crate::core::registry::Answer;
use crate::core::registry::node_config::PullConfig;

/// How the registry is reached, and what an answer it cannot give comes to.
pub struct RegistryAsk {
    reach: Reach,
    unverified: WhenUnverified,
}

enum Reach {
    /// Live; the node's pull configuration is not read yet.
    Live(Client),
    /// Asks as a node pulls.
    Ready(Box<Checker>),
    /// Cannot be asked: every answer is unknown, for this reason.
    Unknown(String),
    /// Not asked (a dump without registry access), for this reason.
    NotAsked(String),
}

impl Reach {
    fn ready(config: PullConfig) -> Self {
        Reach::Ready(Box::new(Checker::new(config, Limits::default())))
    }
}

impl RegistryAsk {
    /// Live: asked with what the cluster's nodes pull with; unknown needs a person unless
    /// `admin_verified` (`--image-loss-verified`).
    pub fn live(client: Client, admin_verified: bool) -> Self {
        RegistryAsk {
            reach: Reach::Live(client),
            unverified: if admin_verified {
                WhenUnverified::AdminVerified
            } else {
                WhenUnverified::Ask
            },
        }
    }

    /// From a dump: asked only with `authfile` and the dump's ControllerConfig. The plan is a
    /// preview either way (`--apply` needs the live cluster and asks again).
    pub fn dump(
        loaded: &Loaded,
        dir: &Path,
        authfile: Option<&Path>,
        admin_verified: bool,
    ) -> Result<Self, PullConfigError> {
        let unverified = if admin_verified {
            WhenUnverified::AdminVerified
        } else {
            WhenUnverified::Preview
        };
        let dump = dump_pull_config(loaded, dir, authfile)?;
        let reach = if !dump.authfile {
            Reach::NotAsked(
                "planned from a dump without --authfile (a dump holds no credentials)".to_string(),
            )
        } else if !dump.controller_config {
            Reach::NotAsked(
                "the dump holds no ControllerConfig, so the node's CAs and proxy are not known"
                    .to_string(),
            )
        } else {
            Reach::ready(dump.config?)
        };
        Ok(RegistryAsk { reach, unverified })
    }

    /// Asks about `images`; with a note for the report when the registry could not be asked.
    pub async fn answers(
        &mut self,
        images: &BTreeSet<String>,
    ) -> (RegistryAnswers, Option<String>) {
        let mut answers = RegistryAnswers {
            unverified: self.unverified,
            ..RegistryAnswers::default()
        };
        if images.is_empty() {
            return (answers, None);
        }
        if let Reach::Live(client) = &self.reach {
            self.reach = match pull_config(client).await {
                Ok(config) => Reach::ready(config),
                Err(e) => Reach::Unknown(format!(
                    "the registry could not be asked as the nodes pull: {e}"
                )),
            };
        }
        let note = match &self.reach {
            Reach::Live(_) => None,
            Reach::Ready(checker) => {
                let specs: Vec<String> = images.iter().cloned().collect();
                for answer in checker.check_all(&specs).await {
                    answers.answers.insert(answer.image, answer.verdict);
                }
                None
            }
            Reach::Unknown(why) => {
                for image in images {
                    answers
                        .answers
                        .insert(image.clone(), Answer::unknown(why.clone()));
                }
                Some(format!("{why}; every stuck node's image is unknown"))
            }
            Reach::NotAsked(why) => {
                answers.not_asked = why.clone();
                Some(format!(
                    "the registry was not asked whether the stuck nodes' images are gone: {why}; \
                     the plan says so for each node"
                ))
            }
        };
        (answers, note)
    }
}
