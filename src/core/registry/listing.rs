//! A repository as the registry listed it: its tags, each resolved to the digest it holds, gone,
//! or could not be told. `access::registry::tags` fills it in; `prune`'s images plan and
//! `serve`'s count of deletable images read it.

use crate::core::registry::internal::Internal;

/// One repository to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushRepository {
    /// `host/path`, as a pull spec writes it (the host lower-cased).
    pub repository: String,
    /// The registry host (`host[:port]`).
    pub host: String,
    /// The repository on that host.
    pub path: String,
    /// The MachineOSConfigs pushing there now.
    pub configs: Vec<String>,
    /// The push secret (in `openshift-machine-config-operator`) prune uses there, if any
    /// object names one.
    pub secret: Option<String>,
}

/// What a tag holds, as the registry answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Available: the digest of the manifest it names (`sha256:...`).
    Available(String),
    /// The registry says it is missing (its own not-found answer), why.
    Missing(String),
    /// Anything else: could not tell.
    Unknown(String),
}

/// One tag of a listed repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagAnswer {
    pub tag: String,
    pub resolved: Resolved,
}

/// One repository as the registry listed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    pub source: PushRepository,
    /// Whether it is OpenShift's internal registry ([`crate::core::registry::internal`]).
    pub internal: Internal,
    /// Its tags, or why they could not be listed.
    pub tags: Result<Vec<TagAnswer>, String>,
}
