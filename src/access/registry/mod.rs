//! Registry truth, the HTTP half: asks registries, as a node pulls (or as MCO reaches them),
//! whether they still serve an image; `core::registry` decides what the answers mean.
//!
//! [`pull`] is the one door to what a node pulls with (live, or a dump with `--authfile`) and to
//! the unknown answer when that cannot be had; [`push`] is prune's, the push secret MCO uses.
//! Every request goes through a [`session::Session`] (one set of credentials: tokens, bounds,
//! redaction): [`Checker`] reads as a node pulls, [`tags`] lists a repository, and [`delete`]
//! is the one write. Why hand-written on reqwest, and the bounds: docs/design.md.

pub mod ask;
pub mod check;
pub mod delete;
pub mod http;
pub mod pull;
pub mod push;
pub mod session;
pub mod tags;
pub mod token;

pub use ask::RegistryAsk;
pub use check::{Checker, ImageAnswer};
pub use pull::{DumpPull, PullConfigError, dump_pull_config, pull_config};
pub use push::Registries;
pub use session::Limits;
